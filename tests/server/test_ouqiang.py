"""The ouqiang/delay-queue protocol at the server's root, on each backend,
driven with the requests its clients send: its README's examples, a Go
client's ``application/json``, curl's form content type over a JSON body."""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
import redis

from chronoq.server import Action, Auth, ServerSettings, Token, hash_token

from .live import LiveServer, index_entry, index_size

DONE = {"code": 0, "message": "操作成功", "data": None}
ADDED = {"code": 0, "message": "添加成功", "data": None}
README_BODY = '{"uid": 10829378,"created": 1498657365 }'


def fail(message: str) -> dict[str, Any]:
    return {"code": 1, "message": message, "data": None}


def call(http: httpx.Client, path: str, body: object, **kw: Any) -> Any:
    answer = http.post(path, json=body, **kw)
    assert answer.status_code == 200, answer.text
    return answer.json()


def push(
    http: httpx.Client, topic: str, job_id: str, delay: int = 1, ttr: int = 60, **kw: Any
) -> None:
    body = {"topic": topic, "id": job_id, "delay": delay, "ttr": ttr, "body": f"body of {job_id}"}
    assert call(http, "/push", {**body, **kw}) == ADDED


@pytest.fixture
def live(serve: Callable[..., LiveServer]) -> LiveServer:
    return serve(ServerSettings().with_limits(pop_wait=2))


@pytest.fixture
def client(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=30) as http:
        yield http


def wait_until(check: Callable[[], bool], what: str, limit: float = 10) -> None:
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_readme_round_trip(client: httpx.Client) -> None:
    job = {"topic": "order", "id": "15702398321", "delay": 1, "ttr": 120, "body": README_BODY}
    before = int(time.time())
    answer = client.post("/push", json=job)
    assert answer.status_code == 200 and answer.json() == ADDED
    got = call(client, "/get", {"id": "15702398321"})
    assert list(got["data"]) == ["topic", "id", "delay", "ttr", "body"]
    data = got["data"]
    assert (data["topic"], data["id"], data["ttr"], data["body"]) == (
        "order", "15702398321", 120, README_BODY
    )  # fmt: skip
    assert before + 1 <= data["delay"] <= int(time.time()) + 1  # due, in Unix seconds
    popped = call(client, "/pop", {"topic": "order"})
    assert popped == {**DONE, "data": {"id": "15702398321", "body": README_BODY}}
    assert call(client, "/get", {"id": "15702398321"})["data"]["delay"] == data["delay"]
    assert call(client, "/finish", {"id": "15702398321"}) == DONE
    assert call(client, "/get", {"id": "15702398321"}) == DONE
    assert call(client, "/pop", {"topic": "order"}) == DONE  # after pop_wait: nothing


def test_curl_sends_json_as_a_form(client: httpx.Client) -> None:
    raw = b'{"topic":"curl","id":"c1","delay":1,"ttr":30,"body":"x"}'
    form = {"content-type": "application/x-www-form-urlencoded"}
    assert client.post("/push", content=raw, headers=form).json() == ADDED
    assert client.post("/get", content=b'{"id":"c1"}', headers=form).json()["data"]["body"] == "x"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"topic":"order","delay":10,"ttr":5}', "job id不能为空"),
        (b'{"id":"a","delay":10,"ttr":5}', "topic 不能为空"),
        (b'{"id":"a","topic":"t","ttr":5}', "delay 取值范围1 - (2^31 - 1)"),
        (b'{"id":"a","topic":"t","delay":-1,"ttr":5}', "delay 取值范围1 - (2^31 - 1)"),
        (b'{"id":"a","topic":"t","delay":2147483649,"ttr":5}', "delay 取值范围1 - (2^31 - 1)"),
        (
            b'{"id":"a","topic":"t","delay":9223372036854775807,"ttr":5}',
            "delay 取值范围1 - (2^31 - 1)",
        ),
        (b'{"id":"a","topic":"t","delay":9223372036854775808,"ttr":5}', "解析json失败"),
        (b'{"id":"a","topic":"t","delay":10}', "ttr 取值范围1 - 86400"),
        (b'{"id":"a","topic":"t","delay":10,"ttr":86401}', "ttr 取值范围1 - 86400"),
        (b'{"id":"a","topic":"t","delay":"10","ttr":5}', "解析json失败"),
        (b'{"id":"a","topic":"t","delay":1.5,"ttr":5}', "解析json失败"),
        (b'{"id":"a","topic":"t","delay":10.0,"ttr":5}', "解析json失败"),
        (b'{"id":"a","topic":"t","delay":1e3,"ttr":5}', "解析json失败"),
        (b'{"id":"a","topic":"t","delay":true,"ttr":5}', "解析json失败"),
        (b'{"id":"a","topic":"t","delay":NaN,"ttr":5}', "解析json失败"),
        (b'{"id":"a","topic":"t","delay":10,"ttr":5,"body":{}}', "解析json失败"),
        (b'{"id":"a","topic":"t","delay":10,"ttr":5,"body":7}', "解析json失败"),
        (b'{"id":7,"topic":"t","delay":10,"ttr":5}', "解析json失败"),
        (b'\xef\xbb\xbf{"id":"a","topic":"t","delay":10,"ttr":5}', "解析json失败"),
        (b'{"id":"a","topic":"t","delay":10,"ttr":5} x', "解析json失败"),
        (b"[]", "解析json失败"),
        (b'"a"', "解析json失败"),
        (b"", "解析json失败"),
        (b"null", "job id不能为空"),
        (b'{"id":null,"topic":"t","delay":10,"ttr":5}', "job id不能为空"),
        (b'{"id":" \\t ","topic":"t","delay":10,"ttr":5}', "job id不能为空"),
    ],
)
def test_push_refusals(http: httpx.Client, body: bytes, message: str) -> None:
    answer = http.post("/push", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 200
    assert answer.json() == fail(message)


def test_refusals_of_the_other_routes(http: httpx.Client) -> None:
    assert call(http, "/pop", {"topic": "  "}) == fail("topic不能为空")
    assert call(http, "/pop", {}) == fail("topic不能为空")
    assert call(http, "/pop", {"topic": " , ,"}) == fail("topic不能为空")
    for path in ("/finish", "/delete", "/get"):
        assert call(http, path, {}) == fail("job id不能为空")
        assert call(http, path, {"id": "\u3000"}) == fail("job id不能为空")
        assert call(http, path, {"id": 1}) == fail("解析json失败")
        assert http.post(path, content=b"{").json() == fail("解析json失败")
    # the fields of other routes are unknown fields here: ignored, as Go does
    assert call(http, "/get", {"id": "nope", "topic": 1, "delay": "x"}) == DONE


def test_refusals_from_chronoq_rules(http: httpx.Client) -> None:
    bad_topic = call(http, "/push", {"topic": "a b", "id": "x", "delay": 5, "ttr": 5})
    assert bad_topic["code"] == 1 and "invalid topic 'a b'" in bad_topic["message"]
    bad_id = call(http, "/push", {"topic": "t", "id": "a b", "delay": 5, "ttr": 5})
    assert bad_id["code"] == 1 and "invalid job id 'a b'" in bad_id["message"]
    index = call(http, "/push", {"topic": "chronoq.byid", "id": "x", "delay": 5, "ttr": 5})
    assert index["code"] == 1 and "index of job ids" in index["message"]
    assert "invalid topic" in call(http, "/pop", {"topic": "ok,not ok"})["message"]
    job = {"topic": "t", "id": "x", "delay": 5, "ttr": 5, "body": "x" * 2**21}
    big = http.post("/push", json=job)
    assert big.status_code == 413  # as tests/server/test_too_large.py checks
    assert big.json()["code"] == 1 and "over the limit" in big.json()["message"]


def test_unknown_ids(http: httpx.Client) -> None:
    assert call(http, "/finish", {"id": "never"}) == DONE  # as ouqiang: DEL of no key
    assert call(http, "/delete", {"id": "never"}) == DONE
    assert call(http, "/get", {"id": "never"}) == DONE
    assert call(http, "/get", {"id": "not an id chronoq takes"}) == DONE


def test_keys_in_any_case_and_unknown_fields(http: httpx.Client) -> None:
    body = {
        "ID": "k1",
        "Topic": "t",
        "DELAY": 5,
        "TTR": 7,
        "Body": "b",
        "command": "add",
        "x": [{}],
    }
    assert call(http, "/push", body) == ADDED
    data = call(http, "/get", {"Id": "k1", "other": None})["data"]
    assert (data["topic"], data["id"], data["ttr"], data["body"]) == ("t", "k1", 7, "b")
    # a duplicate key, in any case: the last one wins
    raw = b'{"id":"k1","ID":"k2","topic":"t","delay":5,"ttr":5}'
    assert http.post("/push", content=raw).json() == ADDED
    assert call(http, "/get", {"id": "k2"})["data"]["id"] == "k2"


def test_id_topic_and_body_are_trimmed(http: httpx.Client) -> None:
    body = {"id": " \tk \n", "topic": "\u3000t ", "delay": 5, "ttr": 5, "body": "  x y \r\n"}
    assert call(http, "/push", body) == ADDED
    data = call(http, "/get", {"id": "  k"})["data"]
    assert (data["id"], data["topic"], data["body"]) == ("k", "t", "x y")
    job = http.get("/v1/topics/t/jobs/k").json()
    assert job["payload"] == "x y" and "group" not in job  # the default group


def test_any_method_is_taken(http: httpx.Client) -> None:
    job = {"topic": "m", "id": "m1", "delay": 5, "ttr": 5}
    assert http.put("/push", json=job).json() == ADDED
    assert http.request("PATCH", "/get", json={"id": "m1"}).json()["data"]["id"] == "m1"
    assert http.request("DELETE", "/delete", json={"id": "m1"}).json() == DONE
    assert http.get("/get").json() == fail("解析json失败")  # no body: as ouqiang


def test_a_get_shows_the_due_time_and_a_long_delay(http: httpx.Client) -> None:
    now = time.time()
    push(http, "t", "far", delay=2**31)  # past chronoq's ten-year delay: a due time then
    data = call(http, "/get", {"id": "far"})["data"]
    assert abs(data["delay"] - (now + 2**31)) <= 2
    push(http, "t", "ttr", ttr=86400)
    assert call(http, "/get", {"id": "ttr"})["data"]["ttr"] == 86400


def test_multi_topic_pop(client: httpx.Client, live: LiveServer) -> None:
    push(client, "b", "b1")
    assert call(client, "/pop", {"topic": "a,b"})["data"]["id"] == "b1"
    push(client, "a", "a2")
    push(client, "b", "b2")
    time.sleep(1.1)  # both due
    assert call(client, "/pop", {"topic": " b , a"})["data"]["id"] == "b2"  # the first listed
    assert call(client, "/pop", {"topic": "b,a"})["data"]["id"] == "a2"
    # nothing was leased for nobody: only the three popped jobs are reserved
    stats = [client.get(f"/v1/topics/{t}/stats").json() for t in "ab"]
    assert [s["reserved"] for s in stats] == [1, 2] and [s["ready"] for s in stats] == [0, 0]


def test_multi_topic_pop_waits_on_every_topic(client: httpx.Client) -> None:
    push(client, "later", "l1", delay=1)
    started = time.monotonic()
    answer = call(client, "/pop", {"topic": "none,later,other"})
    assert answer["data"] == {"id": "l1", "body": "body of l1"}
    assert 0.5 <= time.monotonic() - started < 1.9  # woken when due, before pop_wait ends


def test_pop_is_a_long_poll_that_ends_empty(client: httpx.Client) -> None:
    started = time.monotonic()
    assert call(client, "/pop", {"topic": "empty"}) == DONE
    assert 1.9 <= time.monotonic() - started < 5  # pop_wait is 2 s here


def test_an_unfinished_job_comes_back_after_its_ttr(client: httpx.Client) -> None:
    push(client, "r", "r1", delay=1, ttr=1)
    first = call(client, "/pop", {"topic": "r"})["data"]
    started = time.monotonic()
    again = call(client, "/pop", {"topic": "r"})["data"]
    assert first == again == {"id": "r1", "body": "body of r1"}
    assert 0.5 <= time.monotonic() - started < 1.9
    state = client.get("/v1/topics/r/jobs/r1").json()
    assert state["attempts"] == 2 and state["max_attempts"] == 1_000_000
    assert call(client, "/finish", {"id": "r1"}) == DONE
    assert client.get("/v1/topics/r/jobs/r1").status_code == 404


def _hang_up_during(live: LiveServer, path: str, body: dict[str, Any]) -> None:
    host, port = live.url.removeprefix("http://").split(":")
    raw = json.dumps(body).encode()
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(raw)}\r\n\r\n".encode()
            + raw
        )
        wait_until(lambda: live.app.polls.waiting >= 1, "the pop does not wait")
    wait_until(lambda: live.app.polls.waiting == 0, "the hung-up pop still waits")


def break_reserve(store_url: str, topic: str) -> None:
    """Make the store fail every reserve on ``topic``, and nothing else: on
    SQLite a trigger that aborts any change to the topic's jobs, on Redis the
    topic's lease set overwritten with a string (WRONGTYPE)."""
    if store_url.startswith("redis://"):
        prefix = dict(parse_qsl(urlsplit(store_url).query))["prefix"]
        client = redis.Redis.from_url(store_url.partition("?")[0])
        try:
            client.set(f"{prefix}:{{{topic}:0}}:leased", "not a sorted set")
        finally:
            client.close()
        return
    with contextlib.closing(sqlite3.connect(store_url.removeprefix("sqlite:///"))) as db:
        db.execute(
            f"CREATE TRIGGER broken BEFORE UPDATE ON jobs WHEN OLD.topic = '{topic}' "
            f"BEGIN SELECT RAISE(ABORT, 'the jobs of {topic} are broken'); END"
        )


def pop_failing_on_one_topic(
    live: LiveServer, store_url: str, pop: Callable[[httpx.Client], Any]
) -> Any:
    """The answer of ``pop``, a pop waiting on the topics "sick" and "well",
    when a job becomes due on "sick", whose reserve fails; then checks that
    nothing waits on "well" any longer, so a job put there is not leased for
    nobody."""
    with httpx.Client(base_url=live.url, timeout=60) as http, ThreadPoolExecutor(1) as pool:
        popping = pool.submit(pop, http)
        wait_until(lambda: live.app.polls.waiting >= 1, "the pop does not wait")
        break_reserve(store_url, "sick")
        with httpx.Client(base_url=live.url, timeout=30) as other:
            push(other, "sick", "s1", delay=1)
        answer = popping.result(timeout=30)
        assert live.app.polls.waiting == 0  # stopped before the answer went out
        push(http, "well", "w1", delay=1, ttr=600)
        time.sleep(1.5)
        job = http.get("/v1/topics/well/jobs/w1").json()
        assert (job["state"], job["attempts"]) == ("ready", 0)
        started = time.monotonic()
        assert call(http, "/pop", {"topic": "well"})["data"]["id"] == "w1"
        assert time.monotonic() - started < 1  # at once, not after its ttr of 600 s
    return answer


def test_a_multi_topic_pop_failing_on_one_topic_leases_nothing_on_the_others(
    serve: Callable[..., LiveServer], store_url: str
) -> None:
    live = serve(ServerSettings().with_limits(pop_wait=30))
    answer = pop_failing_on_one_topic(
        live, store_url, lambda http: call(http, "/pop", {"topic": "sick,well"})
    )
    assert answer["code"] == 1 and answer["data"] is None, answer  # the store's error


def test_a_pop_whose_client_hangs_up_leaves_the_job(
    serve: Callable[..., LiveServer],
) -> None:
    live = serve(ServerSettings().with_limits(pop_wait=30))
    with httpx.Client(base_url=live.url, timeout=30) as http:
        _hang_up_during(live, "/pop", {"topic": "gone,gone2"})
        push(http, "gone", "g1", delay=1, ttr=600)
        time.sleep(1.3)
        job = http.get("/v1/topics/gone/jobs/g1").json()
        assert (job["state"], job["attempts"]) == ("ready", 0)  # not leased for nobody
        started = time.monotonic()
        assert call(http, "/pop", {"topic": "gone"})["data"]["id"] == "g1"
        assert time.monotonic() - started < 1  # at once, long before its ttr of 600 s


def test_ids_are_known_to_every_server_on_the_store(serve: Callable[..., LiveServer]) -> None:
    settings = ServerSettings().with_limits(pop_wait=2)
    one, two = serve(settings), serve(settings)
    with httpx.Client(base_url=one.url) as a, httpx.Client(base_url=two.url) as b:
        push(a, "shared", "s1")
        assert call(b, "/get", {"id": "s1"})["data"]["topic"] == "shared"
        assert call(b, "/pop", {"topic": "shared"})["data"]["id"] == "s1"
        assert call(a, "/finish", {"id": "s1"}) == DONE
        assert call(b, "/get", {"id": "s1"}) == DONE
        push(a, "shared", "s2", delay=100)
    one.stop()
    two.stop()
    with httpx.Client(base_url=serve(settings).url) as c:  # a restart
        assert call(c, "/get", {"id": "s2"})["data"]["topic"] == "shared"
        assert call(c, "/delete", {"id": "s2"}) == DONE
        assert call(c, "/get", {"id": "s2"}) == DONE


def test_a_push_of_an_existing_id_replaces_it(client: httpx.Client, store_url: str) -> None:
    push(client, "t1", "x", delay=100, body="one")
    push(client, "t2", "x", delay=1, ttr=30, body="two")  # another topic, as ouqiang allows
    data = call(client, "/get", {"id": "x"})["data"]
    assert (data["topic"], data["body"], data["ttr"]) == ("t2", "two", 30)
    assert client.get("/v1/topics/t1/jobs/x").status_code == 404
    assert index_entry(store_url, "x") == {"topic": "t2"}
    assert call(client, "/pop", {"topic": "t2"})["data"]["body"] == "two"
    again = call(client, "/push", {"topic": "t2", "id": "x", "delay": 1, "ttr": 5, "body": "3"})
    assert again["code"] == 1 and "reserved by a consumer" in again["message"]
    assert call(client, "/finish", {"id": "x"}) == DONE
    push(client, "t2", "x", body="four")
    assert call(client, "/get", {"id": "x"})["data"]["body"] == "four"


def test_pushes_at_once_each_name_their_job(client: httpx.Client, store_url: str) -> None:
    # new ids at once (their entries' creates and their jobs' puts may meet
    # at the store as grouped calls), and one new id from many connections
    # at once (one create wins, the others find its entry): each job named
    fresh = [f"g{n}" for n in range(40)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda job_id: push(client, "grp", job_id, delay=100), fresh))
        list(pool.map(lambda _: push(client, "grp", "same", delay=100), range(16)))
    for job_id in [*fresh, "same"]:
        assert index_entry(store_url, job_id) == {"topic": "grp"}, job_id
        assert call(client, "/get", {"id": job_id})["data"]["topic"] == "grp"
    assert client.get("/v1/topics/grp/stats").json()["total"] == 41


def test_jobs_put_through_v1_pop_as_text(client: httpx.Client) -> None:
    client.post("/v1/topics/v/jobs", json={"id": "j", "payload": {"a": [1, "é"]}})
    client.post("/v1/topics/v/jobs", json={"id": "n"})
    popped = [call(client, "/pop", {"topic": "v"})["data"] for _ in range(2)]
    assert sorted(popped, key=lambda d: d["id"]) == [
        {"id": "j", "body": '{"a":[1,"é"]}'},
        {"id": "n", "body": ""},
    ]


def test_the_index_topic_and_the_metrics(client: httpx.Client, store_url: str) -> None:
    push(client, "mx", "m1")
    assert index_entry(store_url, "m1") == {"topic": "mx"}
    assert "chronoq.byid" not in client.get("/v1/topics").json()["topics"]  # not the API's
    call(client, "/pop", {"topic": "mx"})
    call(client, "/finish", {"id": "m1"})
    assert index_size(store_url) == 0
    lines = client.get("/metrics").text.splitlines()
    for kind in ("put", "reserve", "delete"):
        counted = [
            line
            for line in lines
            if line.startswith("chronoq_transitions_total{")
            and f'kind="{kind}"' in line
            and 'topic="mx"' in line
        ]
        assert len(counted) == 1 and counted[0].endswith(" 1.0"), (kind, counted)


SECRETS = {"put": "s-put", "reserve": "s-reserve", "read": "s-read", "billing": "s-billing"}


def _secured(serve: Callable[..., LiveServer]) -> LiveServer:
    tokens = [
        Token(name, hash_token(SECRETS[name]), ("orders.*",), frozenset({Action(name)}))
        for name in ("put", "reserve", "read")
    ]
    tokens.append(
        Token("billing", hash_token(SECRETS["billing"]), ("billing.*",), frozenset(Action))
    )
    return serve(ServerSettings(auth=Auth(tokens)).with_limits(pop_wait=1))


def as_(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {SECRETS[name]}"}


def test_tokens(serve: Callable[..., LiveServer]) -> None:
    live = _secured(serve)
    job = {"topic": "orders.eu", "id": "o1", "delay": 1, "ttr": 60, "body": "b"}
    with httpx.Client(base_url=live.url, timeout=30) as http:
        none = http.post("/push", json=job)
        assert none.status_code == 401 and none.json()["code"] == 1  # ouqiang's envelope
        assert "Authorization" in none.json()["message"] and none.json()["data"] is None
        assert http.post("/push", json=job, headers=as_("reserve")).status_code == 403
        assert call(http, "/push", job, headers=as_("put")) == ADDED
        elsewhere = http.post("/push", json={**job, "id": "o2"}, headers=as_("billing"))
        assert elsewhere.status_code == 403  # billing.* only
        bill = {"topic": "billing.x", "id": "b1", "delay": 1, "ttr": 60}
        assert call(http, "/push", bill, headers=as_("billing")) == ADDED
        # by id: checked against the job's real topic, without naming it
        refused = http.post("/get", json={"id": "b1"}, headers=as_("read"))
        assert refused.status_code == 403 and "billing" not in refused.text
        assert call(http, "/get", {"id": "nope"}, headers=as_("read")) == DONE  # as ouqiang
        assert call(http, "/get", {"id": "o1"}, headers=as_("read"))["data"]["id"] == "o1"
        assert http.post("/finish", json={"id": "b1"}, headers=as_("reserve")).status_code == 403
        assert http.post("/delete", json={"id": "b1"}, headers=as_("put")).status_code == 403
        assert (
            http.post(
                "/pop", json={"topic": "orders.eu,billing.x"}, headers=as_("reserve")
            ).status_code
            == 403
        )
        assert (
            call(http, "/pop", {"topic": "orders.eu"}, headers=as_("reserve"))["data"]["id"] == "o1"
        )
        assert call(http, "/finish", {"id": "o1"}, headers=as_("reserve")) == DONE
        assert call(http, "/delete", {"id": "b1"}, headers=as_("billing")) == DONE
        assert call(http, "/get", {"id": "b1"}, headers=as_("billing")) == DONE


def test_a_push_may_not_replace_a_job_on_a_topic_outside_the_token(
    serve: Callable[..., LiveServer],
) -> None:
    tokens = [
        Token("orders", hash_token("s-orders"), ("orders.*",), frozenset(Action)),
        Token("billing", hash_token("s-billing"), ("billing.*",), frozenset(Action)),
        Token("both", hash_token("s-both"), ("orders.*", "billing.*"), frozenset(Action)),
        # a glob that names the server's own topics reads them ("*" alone does not)
        Token("ops", hash_token("s-ops"), ("*", "chronoq.*"), frozenset({Action.READ})),
    ]
    live = serve(ServerSettings(auth=Auth(tokens)))
    orders, billing, both, ops = (
        {"authorization": f"Bearer s-{n}"} for n in ("orders", "billing", "both", "ops")
    )
    with httpx.Client(base_url=live.url, timeout=30) as http:
        bill = {"topic": "billing.x", "id": "pay-1", "delay": 3600, "ttr": 60, "body": "b"}
        assert call(http, "/push", bill, headers=billing) == ADDED
        # the same id on a topic the orders token may use would delete billing's job
        mine = {**bill, "topic": "orders.eu", "body": "mine"}
        refused = http.post("/push", json=mine, headers=orders)
        assert refused.status_code == 403 and refused.json()["code"] == 1
        assert "pay-1" in refused.json()["message"] and "billing" not in refused.text
        kept = http.get("/v1/topics/billing.x/jobs/pay-1", headers=billing).json()
        assert (kept["state"], kept["payload"]) == ("delayed", "b")
        assert http.get("/v1/topics/orders.eu/jobs/pay-1", headers=orders).status_code == 404
        entry = http.get("/v1/topics/chronoq.byid/jobs/pay-1", headers=ops).json()
        assert entry["payload"] == {"topic": "billing.x"}  # nothing written
        # a token that may put on both topics moves the job, as ouqiang does
        assert call(http, "/push", mine, headers=both) == ADDED
        data = call(http, "/get", {"id": "pay-1"}, headers=orders)["data"]
        assert (data["topic"], data["body"]) == ("orders.eu", "mine")
        assert http.get("/v1/topics/billing.x/jobs/pay-1", headers=billing).status_code == 404
