"""chronoq without the OpenTelemetry API (no ``otel`` extra): a process in
which ``import opentelemetry`` fails puts and runs a worker as ever, and
stores no context. With the API installed, chronoq does not import it
until the application did."""

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


def _runs_ok(code: str, store: Path) -> None:
    """``code`` in a new interpreter, on a SQLite file, prints "ok"."""
    run = subprocess.run(
        [sys.executable, "-c", code, f"sqlite:///{store}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


def test_chronoq_works_without_the_api(tmp_path: Path) -> None:
    _runs_ok(CODE, tmp_path / "plain.db")


LATER = """
import sys
import chronoq
from chronoq import tracing

q = chronoq.connect(sys.argv[1])
first = q.put("t", 1)
assert tracing.available() and not tracing.active()
assert not [name for name in sys.modules if name.startswith("opentelemetry")]  # not imported
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
second = q.put("t", 2)  # the API imported, no provider yet
trace.set_tracer_provider(TracerProvider())
third = q.put("t", 3)
found = [q.get("t", r.id).traceparent for r in (first, second, third)]
assert found[:2] == [None, None] and found[2].startswith("00-"), found
print("ok")
"""


def test_chronoq_imports_the_api_only_once_the_application_did(tmp_path: Path) -> None:
    _runs_ok(LATER, tmp_path / "later.db")
