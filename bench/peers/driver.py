"""The producer side of one system under test, run inside that system's venv
by bench/peers/run.py.

    python driver.py SYSTEM describe
    python driver.py SYSTEM enqueue PLAN {single|bulk}
    python driver.py SYSTEM worker-argv PYTHON

``SYSTEM`` names the adapter module ``peer_<SYSTEM>`` (bench/peers/systems).
``PLAN`` is a JSON file ``{"jobs": [[id, due], ...]}``. ``enqueue`` puts every
job through one call each of the system's delayed API (``single``) or through
its bulk API (``bulk``), then prints one JSON line: when it started and
finished (epoch seconds) and how many jobs; ``describe`` prints the
adapter's version and whether it has a bulk API; ``worker-argv`` the command
of the system's worker, run with the interpreter ``PYTHON``. Standard library
only, besides the adapter. A system that runs in Node has the same verbs and
answers in ``node/driver.js``.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "systems")]


def main(argv: list[str]) -> int:
    system, verb = argv[0], argv[1]
    adapter = importlib.import_module(f"peer_{system}")
    if verb == "describe":
        print(json.dumps({"version": adapter.version(), "bulk": bool(adapter.Client.bulk)}))
        return 0
    if verb == "worker-argv":
        print(json.dumps(adapter.worker_argv(argv[2], os.environ["BENCH_STORE"])))
        return 0
    plan = json.loads(Path(argv[2]).read_text())
    jobs = [(str(i), float(due)) for i, due in plan["jobs"]]
    client = adapter.Client(os.environ["BENCH_STORE"])
    try:
        started = time.time()
        if argv[3] == "bulk":
            client.enqueue_many(jobs)
        else:
            for job_id, due in jobs:
                client.enqueue(job_id, due)
        finished = time.time()
    finally:
        client.close()
    print(json.dumps({"started": started, "finished": finished, "n": len(jobs)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
