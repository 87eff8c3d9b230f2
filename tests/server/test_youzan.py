"""The Youzan design's JSON command protocol at POST /v1/command, on each
backend, with the commands as its article writes them (``TTR`` in capitals)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from chronoq.server import Action, Auth, ServerSettings, Token, hash_token

from .live import LiveServer

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


def test_the_article_round_trip(http: httpx.Client) -> None:
    assert command(http, ARTICLE) == ok("ordercloseorderNo1")
    job = http.get("/v1/topics/orderclose/jobs/ordercloseorderNo1").json()
    assert (job["ttr"], job["payload"], job["max_attempts"]) == (60, '{"order": 1}', 1_000_000)
    popped = command(http, {"command": "pop", "topic": "orderclose"})
    assert popped == ok("ordercloseorderNo1", '{"order": 1}')
    assert command(http, {"command": "pop", "topic": "orderclose"}) == ok()  # at once: nothing
    assert command(http, {"command": "finish", "id": "ordercloseorderNo1"}) == ok(
        "ordercloseorderNo1"
    )
    assert http.get("/v1/topics/orderclose/jobs/ordercloseorderNo1").status_code == 404
    assert http.get("/v1/topics/chronoq.byid/stats").json()["total"] == 0


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
def test_refusals(http: httpx.Client, body: bytes, error: str) -> None:
    answer = http.post("/v1/command", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 200
    reply = answer.json()
    assert reply["success"] is False and error in reply["error"], reply["error"]
    assert set(reply) == {"success", "error", "id", "value"} and reply["value"] is None
    assert http.get("/v1/topics/chronoq.byid/stats").json()["total"] == 0  # nothing written


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
            b"POST /v1/command HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
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
