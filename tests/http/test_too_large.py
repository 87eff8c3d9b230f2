"""The HTTP clients raise ``PayloadTooLarge``, as ``Queue`` does, for a 413:
a payload over the server store's ``max_payload`` (with its size, the limit
and a batch's index), a body over the server's ``limits.max_body``, and a
proxy's 413 (which says neither size)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import chronoq.http
from chronoq import Job
from chronoq.errors import PayloadTooLarge
from chronoq.server import ServerSettings

from ..aio_bridge import BridgedQueue
from ..server.live import LiveServer
from .fault_server import Answer, FaultServer

LIMIT = 100


def client_of(kind: str, url: str) -> Any:
    if kind == "sync":
        return chronoq.http.Client(url, retries=0)
    return BridgedQueue(lambda: chronoq.http.AsyncClient(url, retries=0))  # type: ignore[arg-type, return-value]


@pytest.fixture(params=["sync", "aio"])
def small_client(
    request: pytest.FixtureRequest, serve: Callable[..., LiveServer], store_url: str
) -> Iterator[Any]:
    """A client of each kind of a server whose store's max_payload is ``LIMIT``."""
    store = store_url + ("&" if "?" in store_url else "?") + f"max_payload={LIMIT}"
    client = client_of(request.param, serve(store=store).url)
    yield client
    client.close()


def test_a_payload_over_the_stores_limit(small_client: Any) -> None:
    with pytest.raises(PayloadTooLarge) as big:
        small_client.put("t", "x" * (LIMIT - 1), id="big")
    assert (big.value.size, big.value.limit, big.value.index) == (LIMIT + 1, LIMIT, None)
    assert str(big.value).startswith(f"payload is {LIMIT + 1} bytes, over the limit of {LIMIT}")
    jobs = [Job(1), Job("x" * (LIMIT - 2)), Job(b"b" * (LIMIT + 1))]
    with pytest.raises(PayloadTooLarge) as in_batch:
        small_client.put_many("t", jobs)
    error = in_batch.value
    assert (error.size, error.limit, error.index) == (LIMIT + 1, LIMIT, 2)
    assert str(error).count("job #2 of the batch") == 1
    assert small_client.stats("t")["total"] == 0
    assert small_client.put("t", "x" * (LIMIT - 2), id="fits").created
    assert len(small_client.put_many("t", jobs[:2])) == 2


@pytest.mark.parametrize("kind", ["sync", "aio"])
def test_a_body_over_the_servers_limit(serve: Callable[..., LiveServer], kind: str) -> None:
    server = serve(ServerSettings().with_limits(max_body=1000))
    client = client_of(kind, server.url)
    try:
        with pytest.raises(PayloadTooLarge, match=r"limits\.max_body") as big:
            client.put("t", "x" * 2000)
        assert big.value.limit == 1000 and big.value.size is not None and big.value.size > 2000
        assert big.value.index is None
        assert client.stats("t")["total"] == 0
    finally:
        client.close()


def test_a_proxys_413() -> None:
    page = Answer.page(413, "<html>413 Request Entity Too Large</html>")
    with (
        FaultServer(page) as proxy,
        chronoq.http.Client(proxy.url, retries=0) as client,
        pytest.raises(PayloadTooLarge, match="proxy") as refused,
    ):
        client.put("t", "x")
    assert (refused.value.size, refused.value.limit, refused.value.index) == (None, None, None)
    assert "413 Request Entity Too Large" in str(refused.value)
