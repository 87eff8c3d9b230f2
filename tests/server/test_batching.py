"""Group commit over real HTTP: requests that meet at the store go in one
call, and each still gets its own answer — as if they had gone one by one."""

from __future__ import annotations

import asyncio

import httpx

from .live import LiveServer


def _gather(server: LiveServer, calls: list[tuple[str, str, object]]) -> list[httpx.Response]:
    async def run() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(base_url=server.url, timeout=30, limits=limits) as client:
            return await asyncio.gather(
                *(client.request(method, path, json=body) for method, path, body in calls)
            )

    return asyncio.run(run())


def test_concurrent_puts_each_get_their_own_answer(server: LiveServer, http: httpx.Client) -> None:
    calls = [("POST", "/v1/topics/g/jobs", {"id": f"j{i % 150}", "payload": i}) for i in range(300)]
    answers = _gather(server, calls)
    created = [a for a in answers if a.status_code == 201]
    assert len(created) == 150 and {a.json()["id"] for a in created} == {
        f"j{i}" for i in range(150)
    }
    assert all(
        a.status_code == 200 and not a.json()["created"] for a in answers if a not in created
    )
    assert http.get("/v1/topics/g/stats").json()["total"] == 150
    bad = _gather(server, [("POST", "/v1/topics/g/jobs", {"id": "bad id"}), *calls[:20]])
    assert bad[0].status_code == 400 and all(a.status_code == 200 for a in bad[1:])


def test_concurrent_acks_each_get_their_own_answer(server: LiveServer, http: httpx.Client) -> None:
    http.post("/v1/topics/a/jobs:batch", json={"jobs": [{"id": f"j{i}"} for i in range(100)]})
    jobs = http.post("/v1/topics/a/reserve", json={"count": 100}).json()["jobs"]
    calls = [("POST", f"/v1/topics/a/jobs/{j['id']}/ack", {"lease": j["lease"]}) for j in jobs]
    calls += calls[:10]  # each acked twice: once 200, once 409
    calls.append(("POST", "/v1/topics/a/jobs/j0/ack", {"lease": "stale"}))
    answers = _gather(server, calls)
    by_id: dict[str, list[int]] = {}
    for (_, path, _), answer in zip(calls, answers, strict=True):
        by_id.setdefault(path.split("/")[5], []).append(answer.status_code)
    assert sorted(by_id["j0"]) == [200, 409, 409]
    assert all(
        sorted(codes) == [200, 409]
        for j, codes in by_id.items()
        if j[1:].isdigit() and 0 < int(j[1:]) < 10
    )
    assert all(codes == [200] for j, codes in by_id.items() if int(j[1:]) >= 10)
    assert http.get("/v1/topics/a/stats").json()["total"] == 0


def test_concurrent_reserves_share_the_jobs(server: LiveServer, http: httpx.Client) -> None:
    http.post("/v1/topics/r/jobs:batch", json={"jobs": [{"id": f"j{i}"} for i in range(60)]})
    calls = [("POST", "/v1/topics/r/reserve", {"count": 1 + i % 3}) for i in range(80)]
    answers = _gather(server, calls)
    got = [job["id"] for a in answers for job in a.json()["jobs"]]
    assert sorted(got) == sorted(f"j{i}" for i in range(60))  # each once, none lost
    for (_, _, body), answer in zip(calls, answers, strict=True):
        assert len(answer.json()["jobs"]) <= body["count"]  # type: ignore[index]
