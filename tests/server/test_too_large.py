"""A payload over the store's ``max_payload`` answers 413 on every protocol
that takes one (the /v1 put and batch put, the Youzan ``add``, the ouqiang
``/push``), in that protocol's own shape, and writes nothing; a payload of
exactly the limit is put. A body over the server's ``limits.max_body``
answers the same 413 ``too_large``."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import chronoq.aio
from chronoq import Job
from chronoq.errors import PayloadTooLarge
from chronoq.server import ServerSettings
from chronoq.server.grouped_puts import GroupedPuts

from .live import LiveServer, index_size, start_server

LIMIT = 100  # the store's max_payload in these tests, in bytes
AT_LIMIT = "x" * (LIMIT - 2)  # a JSON string: its text has two quotes more
OVER = "x" * (LIMIT - 1)  # one byte over
MESSAGE = f"payload is {LIMIT + 1} bytes, over the limit of {LIMIT}"


def small(store_url: str) -> str:
    """The test's store with a payload limit of ``LIMIT`` bytes."""
    return store_url + ("&" if "?" in store_url else "?") + f"max_payload={LIMIT}"


@pytest.fixture
def store(store_url: str) -> str:
    return small(store_url)


@pytest.fixture
def http(serve: Callable[..., LiveServer], store: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=serve(store=store).url, timeout=30) as client:
        yield client


def too_large(answer: httpx.Response) -> dict[str, Any]:
    """The error of a /v1 413, checked for its code and sizes."""
    assert answer.status_code == 413, answer.text
    error: dict[str, Any] = answer.json()["error"]
    assert error["code"] == "too_large"
    assert (error["size"], error["limit"]) == (LIMIT + 1, LIMIT)
    assert MESSAGE in error["message"] and "max_payload" in error["message"]
    return error


def total(http: httpx.Client, topic: str) -> int:
    return int(http.get(f"/v1/topics/{topic}/stats").json()["total"])


def test_native_put(http: httpx.Client) -> None:
    error = too_large(http.post("/v1/topics/t/jobs", json={"id": "big", "payload": OVER}))
    assert "index" not in error
    binary = {"payload_b64": base64.b64encode(b"b" * (LIMIT + 1)).decode()}
    too_large(http.post("/v1/topics/t/jobs", json=binary))
    assert total(http, "t") == 0
    fits = http.post("/v1/topics/t/jobs", json={"id": "fits", "payload": AT_LIMIT})
    assert fits.status_code == 201
    binary = {"payload_b64": base64.b64encode(b"b" * LIMIT).decode()}
    assert http.post("/v1/topics/t/jobs", json=binary).status_code == 201
    assert http.get("/v1/topics/t/jobs/fits").json()["payload"] == AT_LIMIT


def test_native_batch_put(http: httpx.Client) -> None:
    jobs = [{"payload": AT_LIMIT}, {"payload": 1}, {"payload": OVER}, {"payload": 2}]
    error = too_large(http.post("/v1/topics/t/jobs:batch", json={"jobs": jobs}))
    assert error["index"] == 2 and error["message"].startswith("job #2 of the batch: ")
    assert total(http, "t") == 0  # all or nothing
    del jobs[2]
    answer = http.post("/v1/topics/t/jobs:batch", json={"jobs": jobs})
    assert answer.status_code == 200 and len(answer.json()["results"]) == 3


def test_youzan_add(http: httpx.Client, store: str) -> None:
    add = {"command": "add", "topic": "t", "id": "big", "body": OVER}
    answer = http.post("/v1/command", json=add)
    assert answer.status_code == 413, answer.text
    reply = answer.json()
    assert (reply["success"], reply["id"], reply["value"]) == (False, "big", None)
    assert MESSAGE in reply["error"]
    assert total(http, "t") == 0 and index_size(store) == 0
    answer = http.post("/v1/command", json={**add, "id": "fits", "body": AT_LIMIT})
    assert answer.status_code == 200 and answer.json()["success"] is True
    assert http.get("/v1/topics/t/jobs/fits").json()["payload"] == AT_LIMIT


def test_ouqiang_push(http: httpx.Client, store: str) -> None:
    push = {"topic": "t", "id": "big", "delay": 1, "ttr": 5, "body": OVER}
    answer = http.post("/push", json=push)
    assert answer.status_code == 413, answer.text
    reply = answer.json()
    assert (reply["code"], reply["data"]) == (1, None) and MESSAGE in reply["message"]
    assert total(http, "t") == 0 and index_size(store) == 0
    assert http.post("/get", json={"id": "big"}).json()["data"] is None
    answer = http.post("/push", json={**push, "id": "fits", "body": AT_LIMIT})
    assert answer.status_code == 200 and answer.json()["code"] == 0
    assert http.post("/get", json={"id": "fits"}).json()["data"]["body"] == AT_LIMIT


def test_a_grouped_single_put_is_refused_alone(store: str) -> None:
    """Single puts that meet at the store go as one put_many (every
    protocol's); the one too large is refused as its own put would be, the
    others are put."""

    async def main() -> None:
        queue = chronoq.aio.connect(store)
        try:
            puts = GroupedPuts(queue)
            # started in one tick: they reach the store as one group
            answers = await asyncio.gather(
                puts.put("t", Job(1, id="a")),
                puts.put("t", Job(OVER, id="big")),
                puts.put("t", Job(AT_LIMIT, id="b")),
                return_exceptions=True,
            )
            a, big, b = answers
            assert isinstance(big, PayloadTooLarge), big
            assert (big.size, big.limit, big.index) == (LIMIT + 1, LIMIT, None)
            assert str(big).startswith(MESSAGE)
            assert not isinstance(a, BaseException) and a.created
            assert not isinstance(b, BaseException) and b.created
            assert await queue.get("t", "big") is None
        finally:
            await queue.close()

    asyncio.run(main())


def test_a_body_over_max_body_is_too_large_on_every_protocol(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve(ServerSettings().with_limits(max_body=1000))
    big = {"topic": "t", "id": "j", "delay": 1, "ttr": 5, "body": "x" * 1000}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        native = http.post("/v1/topics/t/jobs", json={"payload": "x" * 1000})
        assert native.status_code == 413
        error = native.json()["error"]
        assert (error["code"], error["limit"]) == ("too_large", 1000)
        assert error["size"] == len(native.request.content)
        assert "limits.max_body" in error["message"]

        def chunks() -> Iterator[bytes]:  # no content-length: the size is not known
            yield b" " * 1001

        chunked = http.post("/v1/topics/t/jobs", content=chunks()).json()["error"]
        assert chunked["code"] == "too_large" and "size" not in chunked
        youzan = http.post("/v1/command", json={"command": "add", **big})
        assert youzan.status_code == 413 and youzan.json()["success"] is False
        assert "limits.max_body" in youzan.json()["error"]
        ouqiang = http.post("/push", json=big)
        assert ouqiang.status_code == 413 and ouqiang.json()["code"] == 1
        assert "limits.max_body" in ouqiang.json()["message"]
        assert total(http, "t") == 0


def test_every_operation_that_reads_a_body_lists_413_and_answers_it(
    serve: Callable[..., LiveServer],
) -> None:
    """Any body over ``limits.max_body`` is refused before its route runs:
    the document lists 413 on each operation that reads a body, and each
    answers it."""
    server = serve(ServerSettings().with_limits(max_body=1000))
    with httpx.Client(base_url=server.url, timeout=30) as http:
        paths = http.get("/openapi.json").json()["paths"]
        reading = [
            (path, method)
            for path, operations in paths.items()
            for method in operations
            if method != "get"
        ]
        assert len(reading) >= 15
        for path, method in reading:
            assert "413" in paths[path][method]["responses"], (method, path)
            url = path.replace("{topic}", "t").replace("{id}", "j").replace("{name}", "n")
            answer = http.request(method, url, content=b" " * 1001)
            assert answer.status_code == 413, (method, path, answer.text)
        assert "413" not in paths["/v1/topics/{topic}/jobs/{id}"]["get"]["responses"]


DOCS = Path(__file__).resolve().parents[2] / "docs"
MiB = 1 << 20


def _shown(page: str, section: str) -> list[Any]:
    """The JSON answers a section of a docs page shows."""
    text = (DOCS / page).read_text(encoding="utf-8").split(section, 1)[1].split("\n#", 1)[0]
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.S)]


def test_the_answers_the_docs_show(sqlite_url: str) -> None:
    [batch] = _shown("http.md", "One byte more is refused with 413")
    ouqiang, youzan = _shown("compat.md", "### Too large (413)")
    server = start_server(sqlite_url)  # the default max_payload, 1 MiB
    over = "x" * (MiB - 1)  # its JSON text is one byte over
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            jobs = [{"payload": 1}, {"payload": 2}, {"payload": over}]
            assert http.post("/v1/topics/t/jobs:batch", json={"jobs": jobs}).json() == batch
            push = {"topic": "order", "id": "order-1", "delay": 1, "ttr": 5, "body": over}
            assert http.post("/push", json=push).json() == ouqiang
            add = {"command": "add", "topic": "order", "id": "order-1", "body": over}
            assert http.post("/v1/command", json=add).json() == youzan
    finally:
        server.stop()
