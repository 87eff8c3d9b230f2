"""``chronoq serve`` on a Redis Cluster: a long poll is answered when a job
falls due on any shard of its topic (the server's waiters share its bells)."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from chronoq.http import Client

from ..server.live import start_server


def test_a_long_poll_on_a_cluster_is_answered_when_a_job_falls_due(redis_cluster: Any) -> None:
    server = start_server(f"{redis_cluster.url}?prefix=cq-{uuid.uuid4().hex[:12]}", None)
    try:
        client = Client(server.url)
        got: list[Any] = []
        poll = threading.Thread(target=lambda: got.append(client.reserve("web", wait=10)))
        poll.start()
        time.sleep(0.3)  # the poll waits first
        put = client.put("web", {"a": 1}, delay=0.2)
        poll.join(12)
        [[job]] = got
        assert job.id == put.id and job.payload == {"a": 1}
        assert client.stats("web")["reserved"] == 1
        client.ack(job)
        client.close()
    finally:
        server.stop()
