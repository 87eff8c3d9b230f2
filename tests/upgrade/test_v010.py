"""Stores written by chronoq 0.1.0 (tests/upgrade/make_v010_stores.py made the
fixture in v010/) are read and served by this version with no step by hand:
every job in its state, the remembered id, the recurring schedule, the event
log going on from where it was; new jobs, far ones included, join them."""

from __future__ import annotations

import base64
import itertools
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import chronoq
from chronoq import State

from ..redis_server import RedisServer, redis_server_binary

HERE = Path(__file__).parent / "v010"
IDS = json.loads((HERE / "generated-ids.json").read_text())


@pytest.fixture(scope="module")
def v010_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if redis_server_binary() is None:
        pytest.skip("redis-server is not installed")
    import redis

    server = RedisServer(tmp_path_factory.mktemp("redis-v010"))
    client = redis.Redis(host="127.0.0.1", port=server.port)
    for key, payload in json.loads((HERE / "v010-redis.json").read_text()).items():
        client.restore(key, 0, base64.b64decode(payload))
    client.close()
    yield server.url
    server.stop()


@pytest.fixture(params=["sqlite", "redis"])
def v010(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[chronoq.Queue, str]]:
    if request.param == "sqlite":
        shutil.copy(HERE / "v010.db", tmp_path / "v010.db")
        url = f"sqlite:///{tmp_path / 'v010.db'}"
    else:
        url = request.getfixturevalue("v010_redis")
    with chronoq.connect(url) as q:
        yield q, IDS[request.param]


def test_every_job_of_a_v010_store_is_served(v010: tuple[chronoq.Queue, str]) -> None:
    q, generated = v010
    states = {
        "ready-1": State.READY,
        "ready-2": State.READY,
        "later-1": State.DELAYED,
        "later-2": State.DELAYED,
        "dead-1": State.DEAD,
        "leased-1": State.RESERVED,
    }
    for job_id, state in states.items():
        info = q.get("mail", job_id)
        assert info is not None and info.state is state, (job_id, info)
    later = q.get("mail", "later-2")
    assert later is not None and later.payload == b"\x00raw bytes"
    assert later.ttr == 5 and later.max_attempts == 2
    dead = q.get("mail", "dead-1")
    assert dead is not None and dead.last_error == "broken"
    assert q.get("mail", "done-1") is None
    assert not q.put("mail", "again", id="done-1").created  # still remembered (unique_for)
    report = q.get("reports", generated)
    assert report is not None and report.state is State.DELAYED and report.payload == {"day": 1}
    assert [r.name for r in q.recurring_list("reports")] == ["nightly"]
    stats = q.stats("mail")
    assert (stats["ready"], stats["delayed"], stats["reserved"], stats["dead"]) == (2, 2, 1, 1)


def test_a_v010_store_takes_new_work(v010: tuple[chronoq.Queue, str]) -> None:
    q, _ = v010
    before = q.events("mail", limit=1000).events
    [first, second] = q.reserve("mail", count=2, ttr=30)
    assert [first.id, second.id] == ["ready-1", "ready-2"]  # priority 5 first
    assert first.attempts == 2  # released once under 0.1.0
    q.ack_many([first, second])
    far = q.put("mail", {"to": "d@example.com"}, delay=7 * 86400)
    near = q.put("mail", {"to": "e@example.com"}, id="new-1")
    assert far.created and near.created
    info = q.get("mail", far.id)
    assert info is not None and info.state is State.DELAYED
    assert q.requeue("mail", ["dead-1"]) == 1
    after = q.events("mail", limit=1000).events
    assert after[: len(before)] == before
    new = after[len(before) :]
    assert [e.event for e in new] == ["reserve", "reserve", "ack", "ack", "put", "put", "requeue"]
    assert all(b.seq < a.seq for b, a in itertools.pairwise(after))
