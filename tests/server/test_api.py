"""The /v1 API over real HTTP, on each backend: every endpoint of docs/contract.md §8
does what the Queue method of the same name does."""

from __future__ import annotations

import base64
import time

import httpx


def put(http: httpx.Client, topic: str, **job: object) -> httpx.Response:
    return http.post(f"/v1/topics/{topic}/jobs", json=job)


def test_put_reserve_ack(http: httpx.Client) -> None:
    answer = put(http, "orders", payload={"order": 42}, id="order-42", delay=0)
    assert answer.status_code == 201
    assert answer.json()["id"] == "order-42" and answer.json()["created"] is True
    again = put(http, "orders", payload={"order": 42}, id="order-42")
    assert again.status_code == 200 and again.json()["created"] is False
    jobs = http.post("/v1/topics/orders/reserve", json={"count": 5}).json()["jobs"]
    assert [j["id"] for j in jobs] == ["order-42"]
    job = jobs[0]
    assert job["payload"] == {"order": 42} and job["attempts"] == 1
    assert http.get("/v1/topics/orders/jobs/order-42").json()["state"] == "reserved"
    ack = http.post("/v1/topics/orders/jobs/order-42/ack", json={"lease": job["lease"]})
    assert ack.status_code == 200, ack.text
    again = http.post("/v1/topics/orders/jobs/order-42/ack", json={"lease": job["lease"]})
    assert again.status_code == 409 and again.json()["error"]["code"] == "lease_lost"
    assert http.get("/v1/topics/orders/jobs/order-42").status_code == 404


def test_binary_payload_round_trip(http: httpx.Client) -> None:
    raw = bytes(range(256))
    put(http, "bin", payload_b64=base64.b64encode(raw).decode(), id="b")
    job = http.post("/v1/topics/bin/reserve", json={}).json()["jobs"][0]
    assert job["payload"] is None and base64.b64decode(job["payload_b64"]) == raw


def test_long_poll_answers_when_the_job_is_due(http: httpx.Client) -> None:
    put(http, "later", payload=1, delay=0.3)
    started = time.monotonic()
    jobs = http.post("/v1/topics/later/reserve", json={"wait": 5}).json()["jobs"]
    assert len(jobs) == 1
    assert 0.25 <= time.monotonic() - started < 4  # woken by the due time, not the wait's end


def test_long_poll_ends_empty(http: httpx.Client) -> None:
    started = time.monotonic()
    assert http.post("/v1/topics/none/reserve", json={"wait": 0.3}).json() == {"jobs": []}
    assert time.monotonic() - started >= 0.29


def test_lease_calls(http: httpx.Client) -> None:
    for name in "abcd":
        put(http, "t", id=name, payload=name, max_attempts=2)
    jobs = {j["id"]: j for j in http.post("/v1/topics/t/reserve", json={"count": 4}).json()["jobs"]}
    base = "/v1/topics/t/jobs"
    nack = http.post(f"{base}/a/nack", json={"lease": jobs["a"]["lease"], "delay": 60})
    assert nack.json() == {"state": "delayed"}
    touched = http.post(f"{base}/b/touch", json={"lease": jobs["b"]["lease"], "ttr": 120})
    assert touched.json()["deadline"] > jobs["b"]["deadline"]
    assert http.post(
        f"{base}/c/bury", json={"lease": jobs["c"]["lease"], "error": "bad"}
    ).json() == {"state": "dead"}
    assert http.post(f"{base}/d/release", json={"lease": jobs["d"]["lease"]}).status_code == 200
    assert http.get(f"{base}/d").json()["state"] == "ready"
    dead = http.get("/v1/topics/t/dead").json()["jobs"]
    assert [(j["id"], j["last_error"]) for j in dead] == [("c", "bad")]
    assert http.post("/v1/topics/t/dead/requeue", json={}).json() == {"requeued": 1}
    assert http.get(f"{base}/c").json()["state"] == "ready"


def test_batch_put_and_ack(http: httpx.Client) -> None:
    jobs = [{"id": f"j{i}", "payload": i} for i in range(100)]
    results = http.post("/v1/topics/bulk/jobs:batch", json={"jobs": jobs}).json()["results"]
    assert [r["id"] for r in results] == [f"j{i}" for i in range(100)]
    leased = http.post("/v1/topics/bulk/reserve", json={"count": 100}).json()["jobs"]
    refs = [{"id": j["id"], "lease": j["lease"]} for j in leased]
    refs.append({"id": "j0", "lease": "stale"})
    assert http.post("/v1/topics/bulk/jobs:ack", json={"leases": refs}).json() == {"lost": ["j0"]}
    assert http.get("/v1/topics/bulk/stats").json()["total"] == 0


def test_a_bad_batch_writes_nothing(http: httpx.Client) -> None:
    jobs = [{"id": "ok", "payload": 1}, {"id": "bad id", "payload": 2}]
    answer = http.post("/v1/topics/bulk/jobs:batch", json={"jobs": jobs})
    assert answer.status_code == 400
    assert answer.json()["error"]["index"] == 1 and answer.json()["error"]["code"] == "invalid_job"
    assert http.get("/v1/topics/bulk/stats").json()["total"] == 0


def test_delete_reschedule_pause(http: httpx.Client) -> None:
    put(http, "p", id="x", delay=3600)
    assert http.post("/v1/topics/p/jobs/x/reschedule", json={"delay": 0}).json() == {
        "rescheduled": True
    }
    assert http.post("/v1/topics/p/pause").json() == {"paused": True}
    assert http.post("/v1/topics/p/reserve", json={"wait": 0.1}).json() == {"jobs": []}
    assert http.get("/v1/topics/p/stats").json()["paused"] is True
    assert http.post("/v1/topics/p/resume").json() == {"paused": False}
    assert "p" in http.get("/v1/topics").json()["topics"]
    assert http.delete("/v1/topics/p/jobs/x").json() == {"deleted": True}
    assert http.delete("/v1/topics/p/jobs/x").json() == {"deleted": False}


def test_a_job_id_with_a_slash(http: httpx.Client) -> None:
    put(http, "s", id="a/b?c", payload=1)
    assert http.get("/v1/topics/s/jobs/a%2Fb%3Fc").json()["id"] == "a/b?c"


def test_forecast(http: httpx.Client) -> None:
    for name, delay in (("a", 1500), ("b", 2000), ("c", 4500), ("d", 90_000)):
        put(http, "f", id=name, delay=delay)
    put(http, "f", id="now")  # ready: not forecast
    until = time.time() + 3 * 3600
    answer = http.get("/v1/topics/f/forecast", params={"until": until})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"topic", "start", "step", "counts", "later"}
    assert (body["topic"], body["step"], body["counts"], body["later"]) == (
        "f",
        3600.0,
        [2, 1, 0],
        1,
    )
    assert isinstance(body["start"], int) and abs(body["start"] - time.time() * 1000) < 60_000
    halves = http.get("/v1/topics/f/forecast", params={"until": until, "step": "1800"}).json()
    assert halves["counts"] == [1, 1, 1, 0, 0, 0] and halves["step"] == 1800.0


def test_forecast_refuses_bad_input(http: httpx.Client) -> None:
    later = str(time.time() + 3600)
    for params, complaint in [
        ({}, "until is required: Unix time in seconds"),
        ({"until": "soon"}, "until must be a number, got 'soon'"),
        ({"until": str(time.time() - 60)}, "until must be later than now"),
        ({"until": "1e15"}, "(was it in milliseconds?)"),
        ({"until": "nan"}, "until must be a datetime or epoch seconds"),
        ({"until": later, "step": "0.5"}, "step must be at least 1 s"),
        ({"until": later, "step": "1h"}, "step must be a number, got '1h'"),
        ({"until": str(time.time() + 20_000), "step": "1"}, "at most 10000 steps"),
    ]:
        answer = http.get("/v1/topics/f/forecast", params=params)
        assert answer.status_code == 400, (params, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "invalid_input" and complaint in error["message"], params
    bad_topic = http.get("/v1/topics/no%20space/forecast", params={"until": later})
    assert bad_topic.status_code == 400
