"""The Youzan design's JSON command protocol at POST /v1/command, on each
backend, with the commands as its article writes them (``TTR`` in capitals)."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

import chronoq.aio
from chronoq import State
from chronoq.server import Action, Auth, ServerSettings, Token, hash_token
from chronoq.server.compat.byid import IdJobs
from chronoq.server.longpoll import LongPolls
from chronoq.server.metrics import Metrics

from .live import LiveServer, index_entry, index_size
from .test_ouqiang import pop_failing_on_one_topic

ARTICLE = {
    "command": "add",
    "topic": "orderclose",
    "id": "ordercloseorderNo1",
    "delay": 0,
    "TTR": 60,
    "body": '{"order": 1}',
}


def command(http: httpx.Client, body: object, **kw: Any) -> Any:
    answer = http.post("/v1/command", json=body, **kw)
    assert answer.status_code == 200, answer.text
    return answer.json()


def ok(job_id: str | None = None, value: object = None) -> dict[str, Any]:
    return {"success": True, "error": None, "id": job_id, "value": value}


def test_the_article_round_trip(http: httpx.Client, store_url: str) -> None:
    assert command(http, ARTICLE) == ok("ordercloseorderNo1")
    job = http.get("/v1/topics/orderclose/jobs/ordercloseorderNo1").json()
    assert (job["ttr"], job["payload"], job["max_attempts"]) == (60, '{"order": 1}', 1_000_000)
    assert "group" not in job  # the protocol puts into the default group
    popped = command(http, {"command": "pop", "topic": "orderclose"})
    assert popped == ok("ordercloseorderNo1", '{"order": 1}')
    assert command(http, {"command": "pop", "topic": "orderclose"}) == ok()  # at once: nothing
    assert command(http, {"command": "finish", "id": "ordercloseorderNo1"}) == ok(
        "ordercloseorderNo1"
    )
    assert http.get("/v1/topics/orderclose/jobs/ordercloseorderNo1").status_code == 404
    assert index_size(store_url) == 0


def test_a_body_of_any_json_comes_back_as_it_went(http: httpx.Client) -> None:
    body = {"order": 1, "items": [1.5, None, "é"]}
    assert command(http, {"command": "add", "topic": "t", "id": "j", "body": body}) == ok("j")
    assert command(http, {"command": "pop", "topic": "t"})["value"] == body


def test_keys_and_commands_in_any_case_unknown_fields_and_trimming(http: httpx.Client) -> None:
    add = {"Command": "ADD", "Topic": " t ", "ID": " a1\t", "Ttr": 5, "x": 1}
    assert command(http, add) == ok("a1")
    assert http.get("/v1/topics/t/jobs/a1").json()["ttr"] == 5
    curl = {"content-type": "application/x-www-form-urlencoded"}
    raw = b'{"command":"Pop","TOPIC":"t"}'
    assert http.post("/v1/command", content=raw, headers=curl).json()["id"] == "a1"
    assert command(http, {"COMMAND": "Delete", "Id": "a1"}) == ok("a1")


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"", "not valid JSON"),
        (b"{", "not valid JSON"),
        (b"[1]", "must be a JSON object"),
        (b"{}", "command is missing"),
        (b'{"command": "fly"}', "unknown command 'fly'"),
        (b'{"command": 1}', "unknown command 1"),
        (b'{"command": "add", "id": "x"}', "topic is missing"),
        (b'{"command": "add", "topic": "t"}', "id is missing"),
        (b'{"command": "add", "topic": " ", "id": "x"}', "topic is empty"),
        (b'{"command": "add", "topic": 5, "id": "x"}', "topic must be a string"),
        (b'{"command": "add", "topic": "t", "id": "x", "delay": "5"}', "delay must be a number"),
        (b'{"command": "add", "topic": "t", "id": "x", "delay": -1}', "delay must be from 0 to"),
        (b'{"command": "add", "topic": "t", "id": "x", "delay": 2147483649}', "2147483648 seconds"),
        (b'{"command": "add", "topic": "t", "id": "x", "TTR": 0}', "ttr must be at least"),
        (b'{"command": "add", "topic": "t", "id": "x", "TTR": true}', "ttr must be a number"),
        (b'{"command": "add", "topic": "a b", "id": "x"}', "invalid topic 'a b'"),
        (b'{"command": "add", "topic": "t", "id": "a b"}', "invalid job id 'a b'"),
        (b'{"command": "add", "topic": "chronoq.byid", "id": "x"}', "index of job ids"),
        (b'{"command": "pop"}', "topic is missing"),
        (b'{"command": "pop", "topic": " , "}', "names no topic"),
        (b'{"command": "pop", "topic": "t", "wait": 61}', "wait must be from 0 to 60"),
        (b'{"command": "pop", "topic": "t", "timeout": -1}', "wait must be from 0 to 60"),
        (b'{"command": "pop", "topic": "t", "wait": 1, "timeout": 1}', "not both"),
        (b'{"command": "pop", "topic": "t,a b"}', "invalid topic 'a b'"),
        (b'{"command": "finish"}', "id is missing"),
        (b'{"command": "delete", "id": 7}', "id must be a string"),
    ],
)
def test_refusals(http: httpx.Client, store_url: str, body: bytes, error: str) -> None:
    answer = http.post("/v1/command", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 200
    reply = answer.json()
    assert reply["success"] is False and error in reply["error"], reply["error"]
    assert set(reply) == {"success", "error", "id", "value"} and reply["value"] is None
    assert index_size(store_url) == 0  # nothing written


def test_a_refusal_names_the_id_it_was_about(http: httpx.Client) -> None:
    reply = command(http, {"command": "add", "topic": "t", "id": "x1", "delay": -5})
    assert (reply["success"], reply["id"]) == (False, "x1")


def test_finish_and_delete_of_an_unknown_id_succeed(http: httpx.Client) -> None:
    assert command(http, {"command": "finish", "id": "never"}) == ok("never")
    assert command(http, {"command": "delete", "id": "never"}) == ok("never")


def test_pop_with_a_wait_is_a_long_poll(http: httpx.Client) -> None:
    command(http, {"command": "add", "topic": "later", "id": "l1", "delay": 0.5, "body": 1})
    started = time.monotonic()
    assert command(http, {"command": "pop", "topic": "x,later", "wait": 5}) == ok("l1", 1)
    assert 0.4 <= time.monotonic() - started < 4  # when due, not when the wait ends
    started = time.monotonic()
    assert command(http, {"command": "pop", "topic": "later", "timeout": 0.5}) == ok()
    assert 0.45 <= time.monotonic() - started < 4


def test_an_unfinished_job_comes_back_after_its_ttr(http: httpx.Client) -> None:
    command(http, {"command": "add", "topic": "r", "id": "r1", "TTR": 0.5, "body": "b"})
    assert command(http, {"command": "pop", "topic": "r"}) == ok("r1", "b")
    assert command(http, {"command": "pop", "topic": "r", "wait": 3}) == ok("r1", "b")
    assert http.get("/v1/topics/r/jobs/r1").json()["attempts"] == 2


def test_the_index_is_shared_with_the_ouqiang_protocol(http: httpx.Client) -> None:
    command(http, {"command": "add", "topic": "mix", "id": "y1", "delay": 100})
    assert http.post("/get", json={"id": "y1"}).json()["data"]["topic"] == "mix"
    assert http.post("/finish", json={"id": "y1"}).json()["code"] == 0
    assert http.get("/v1/topics/mix/jobs/y1").status_code == 404
    http.post("/push", json={"topic": "mix", "id": "o1", "delay": 100, "ttr": 5})
    assert command(http, {"command": "delete", "id": "o1"}) == ok("o1")
    assert http.get("/v1/topics/mix/jobs/o1").status_code == 404


def test_a_pop_whose_client_hangs_up_leaves_the_job(server: LiveServer, http: httpx.Client) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    raw = json.dumps({"command": "pop", "topic": "gone", "wait": 30}).encode()
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /v1/command HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(raw)).encode() + b"\r\n\r\n" + raw
        )
        deadline = time.monotonic() + 10
        while server.app.polls.waiting < 1:
            assert time.monotonic() < deadline, "the pop does not wait"
            time.sleep(0.01)
    deadline = time.monotonic() + 10
    while server.app.polls.waiting:
        assert time.monotonic() < deadline, "the hung-up pop still waits"
        time.sleep(0.01)
    command(http, {"command": "add", "topic": "gone", "id": "g1", "TTR": 600})
    job = http.get("/v1/topics/gone/jobs/g1").json()
    assert (job["state"], job["attempts"]) == ("ready", 0)
    assert command(http, {"command": "pop", "topic": "gone"})["id"] == "g1"


def test_tokens(serve: Callable[..., LiveServer]) -> None:
    both = frozenset({Action.PUT, Action.RESERVE})
    tokens = [
        Token("worker", hash_token("s-worker"), ("orders.*",), both),
        Token("producer", hash_token("s-producer"), ("orders.*",), frozenset({Action.PUT})),
        Token("billing", hash_token("s-billing"), ("billing.*",), frozenset(Action)),
    ]
    live = serve(ServerSettings(auth=Auth(tokens)))
    worker = {"authorization": "Bearer s-worker"}
    with httpx.Client(base_url=live.url, timeout=30) as http:
        add = {"command": "add", "topic": "orders.eu", "id": "o1"}
        none = http.post("/v1/command", json=add)
        assert none.status_code == 401 and none.json()["success"] is False
        assert "Authorization" in none.json()["error"]
        # a producer's token adds, and may not pop
        producer = {"authorization": "Bearer s-producer"}
        assert command(http, add, headers=producer) == ok("o1")
        refused = http.post("/v1/command", json={"command": "pop", "topic": "orders.eu"},
                            headers=producer)  # fmt: skip
        assert refused.status_code == 403 and refused.json()["success"] is False
        other = {"command": "add", "topic": "billing.x", "id": "b1"}
        assert http.post("/v1/command", json=other, headers=worker).status_code == 403
        assert command(http, other, headers={"authorization": "Bearer s-billing"}) == ok("b1")
        finish = http.post("/v1/command", json={"command": "finish", "id": "b1"}, headers=worker)
        assert finish.status_code == 403 and "billing" not in finish.text
        pop = {"command": "pop", "topic": "orders.eu"}
        assert command(http, pop, headers=worker) == ok("o1")
        assert command(http, {"command": "finish", "id": "o1"}, headers=worker) == ok("o1")


def test_an_add_may_not_replace_a_job_on_a_topic_outside_the_token(
    serve: Callable[..., LiveServer],
) -> None:
    tokens = [
        Token("orders", hash_token("s-orders"), ("orders.*",), frozenset(Action)),
        Token("billing", hash_token("s-billing"), ("billing.*",), frozenset(Action)),
    ]
    live = serve(ServerSettings(auth=Auth(tokens)))
    orders, billing = ({"authorization": f"Bearer s-{n}"} for n in ("orders", "billing"))
    with httpx.Client(base_url=live.url, timeout=30) as http:
        add = {"command": "add", "topic": "billing.x", "id": "pay-1", "delay": 3600, "body": 1}
        assert command(http, add, headers=billing) == ok("pay-1")
        refused = http.post("/v1/command", json={**add, "topic": "orders.eu"}, headers=orders)
        assert refused.status_code == 403 and refused.json()["success"] is False
        assert "pay-1" in refused.json()["error"] and "billing" not in refused.text
        kept = http.get("/v1/topics/billing.x/jobs/pay-1", headers=billing).json()
        assert (kept["state"], kept["payload"]) == ("delayed", 1)
        assert http.get("/v1/topics/orders.eu/jobs/pay-1", headers=orders).status_code == 404
        # the owner may still finish it by id: the index was not touched
        finish = {"command": "finish", "id": "pay-1"}
        assert command(http, finish, headers=billing) == ok("pay-1")
        assert http.get("/v1/topics/billing.x/jobs/pay-1", headers=billing).status_code == 404


def test_a_multi_topic_pop_failing_on_one_topic_leases_nothing_on_the_others(
    serve: Callable[..., LiveServer], store_url: str
) -> None:
    live = serve()
    pop = {"command": "pop", "topic": "sick,well", "wait": 30}
    answer = pop_failing_on_one_topic(live, store_url, lambda http: command(http, pop))
    assert answer["success"] is False and answer["error"] and answer["value"] is None


def test_a_pop_cancelled_or_raced_leaves_no_job_leased(store_url: str) -> None:
    """A multi-topic pop cancelled while it waits, or as a job comes, and one
    that two topics answer at once: every job that no caller got is ready."""

    async def settled(q: chronoq.aio.AsyncQueue, topic: str, job_id: str) -> State:
        deadline = time.monotonic() + 10
        while (info := await q.get(topic, job_id)) is not None and info.state is State.RESERVED:
            assert time.monotonic() < deadline, f"{topic}/{job_id} stays leased for nobody"
            await asyncio.sleep(0.01)
        assert info is not None
        return info.state

    async def run(q: chronoq.aio.AsyncQueue, polls: LongPolls, jobs: IdJobs) -> None:
        for n in range(12):
            pop = asyncio.ensure_future(jobs.pop(["p1", "p2"], 30, None))
            while polls.waiting < 1:  # one waiter for both topics
                await asyncio.sleep(0.005)
            put = ["p2"] if n % 3 < 2 else ["p1", "p2"]
            if n % 3 == 0:
                pop.cancel()
            await asyncio.gather(*(q.put(t, n, id=f"j{n}", ttr=600) for t in put))
            if n % 3 == 1:
                await asyncio.sleep(n * 0.0005)  # cancelled at varied points of the lease
                pop.cancel()
            try:
                got = await pop
            except asyncio.CancelledError:
                got = None
            for topic in put:
                if got is None or got.topic != topic:
                    assert await settled(q, topic, f"j{n}") is State.READY
                await q.delete(topic, f"j{n}")
            assert n % 3 != 2 or got is not None  # a race of two topics still answers

    async def main() -> None:
        q = chronoq.aio.connect(store_url)
        polls = LongPolls(q)
        try:
            await run(q, polls, IdJobs(q, polls, Metrics()))
        finally:
            await polls.close()
            await q.close()

    asyncio.run(main())


RACE_TOPICS = ("race.a", "race.b")


def _racer(url: str, ids: list[str], seed: int) -> None:
    """Pushes, adds, finishes and deletes of a few ids, over both protocols."""
    rng = random.Random(seed)
    with httpx.Client(base_url=url, timeout=30) as http:
        for _ in range(60):
            job_id, topic, kind = rng.choice(ids), rng.choice(RACE_TOPICS), rng.randrange(4)
            if kind == 0:
                job = {"topic": topic, "id": job_id, "delay": 3600, "ttr": 60}
                assert http.post("/push", json=job).json()["code"] == 0
            elif kind == 1:
                add = {"command": "add", "topic": topic, "id": job_id, "delay": 3600}
                assert command(http, add)["success"] is True
            elif kind == 2:
                assert http.post("/finish", json={"id": job_id}).json()["code"] == 0
            else:
                assert command(http, {"command": "delete", "id": job_id})["success"] is True


def test_racing_pushes_and_finishes_on_two_servers_leave_every_job_in_the_index(
    serve: Callable[..., LiveServer], store_url: str
) -> None:
    servers = (serve(), serve())  # two server processes' worth of state on one store
    ids = [f"r{n}" for n in range(12)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: _racer(servers[n % 2].url, ids, n), range(8)))
    with httpx.Client(base_url=servers[0].url, timeout=30) as http:
        for job_id in ids:
            entry = index_entry(store_url, job_id) or {}
            named = {entry.get("topic"), *entry.get("stale", [])}
            for topic in RACE_TOPICS:
                if http.get(f"/v1/topics/{topic}/jobs/{job_id}").status_code == 200:
                    assert topic in named, (job_id, topic, entry)
        # so a finish by id reaches every job that is left
        for job_id in ids:
            assert http.post("/finish", json={"id": job_id}).json()["code"] == 0
        for topic in RACE_TOPICS:
            assert http.get(f"/v1/topics/{topic}/stats").json()["total"] == 0, topic
        assert index_size(store_url) == 0
