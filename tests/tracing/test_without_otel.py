"""chronoq without the OpenTelemetry API (no ``otel`` extra): a process in
which ``import opentelemetry`` fails puts, runs a worker and serves the
HTTP clients as ever, and stores no context."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CODE = """
import sys
sys.modules["opentelemetry"] = None  # as if it were not installed: its import fails
import threading
import chronoq
import chronoq.tracing as tracing
from chronoq.worker.traced import traced_handlers

assert not tracing.available() and not tracing.active()
handler = lambda job: done.set()
assert traced_handlers({"t": handler}, {"t": False})["t"] is handler
done = threading.Event()
with chronoq.connect(sys.argv[1]) as q:
    result = q.put("t", 1)
    assert q.get("t", result.id).traceparent is None
    worker = chronoq.Worker(q, {"t": handler}, recurring=False)
    thread = threading.Thread(target=worker.run)
    thread.start()
    assert done.wait(20)
    worker.stop()
    thread.join(20)
assert "opentelemetry.trace" not in sys.modules
print("ok")
"""


def test_chronoq_works_without_the_api(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    run = subprocess.run(
        [sys.executable, "-c", CODE, url], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"
