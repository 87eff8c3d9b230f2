"""Writes the stores tests/upgrade/test_v010.py reads, with chronoq 0.1.0.

Run with the 0.1.0 sources first on the path (bdfb90b, the commit the
CHANGELOG calls 0.1.0; it was never tagged):

    git worktree add /tmp/v010 bdfb90b
    redis-server --port 7390 --save "" --appendonly no --daemonize yes
    PYTHONPATH=/tmp/v010/src .venv/bin/python tests/upgrade/make_v010_stores.py \
        redis://127.0.0.1:7390/0 tests/upgrade/v010

It leaves ``v010.db`` (SQLite), ``v010-redis.json`` (every key of the Redis
store as DUMP payloads) and ``generated-ids.json`` (the id 0.1.0 made for the
job put without one, per store) there: jobs in every state, a remembered id, a recurring
schedule and their events. Due times far ahead are in 2100, so the fixture
does not age.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import redis

import chronoq

FAR = 4102444800  # 2100-01-01, epoch seconds


def write(q: chronoq.Queue) -> str:
    q.put("mail", {"to": "a@example.com"}, id="ready-1", priority=5)
    q.put("mail", {"to": "b@example.com"}, id="ready-2")
    q.put("mail", {"to": "c@example.com"}, id="later-1", run_at=FAR)
    q.put("mail", b"\x00raw bytes", id="later-2", run_at=FAR + 60, ttr=5, max_attempts=2)
    q.put("mail", "kept", id="done-1", unique_for=10 * 365 * 86400)
    q.put("mail", "to bury", id="dead-1")
    q.put("mail", "to lease", id="leased-1", priority=-5)
    got = {j.id: j for j in q.reserve("mail", count=10, ttr=10 * 365 * 86400)}
    q.ack(got["done-1"])
    q.bury(got["dead-1"], error="broken")
    for job_id in ("ready-1", "ready-2"):
        q.release(got[job_id])
    generated = q.put("reports", {"day": 1}, run_at=FAR + 3600).id
    q.recurring("reports", name="nightly", cron="0 3 * * *", payload={"kind": "nightly"})
    return generated


def main() -> None:
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    db = out / "v010.db"
    db.unlink(missing_ok=True)
    with chronoq.connect(f"sqlite:///{db}") as q:
        generated = {"sqlite": write(q)}
    client = redis.Redis.from_url(sys.argv[1])
    client.flushdb()
    with chronoq.connect(sys.argv[1]) as q:
        generated["redis"] = write(q)
    keys = {}
    for key in client.scan_iter("*"):
        keys[key.decode()] = base64.b64encode(client.dump(key)).decode()
    (out / "v010-redis.json").write_text(json.dumps(keys, indent=1, sort_keys=True) + "\n")
    (out / "generated-ids.json").write_text(json.dumps(generated, indent=1) + "\n")
    size = db.stat().st_size
    print(f"{len(keys)} Redis keys, SQLite {size} bytes; version {chronoq.__version__}")


if __name__ == "__main__":
    main()
