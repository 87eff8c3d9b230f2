"""``chronoq serve`` as a process: it starts on a store, shares it between
``--workers``, sums its metrics over them, and on SIGTERM answers waiting
long polls with no jobs at once and stops cleanly."""

from __future__ import annotations

import re
import shutil
import signal
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .live import ServeProcess as Served


@pytest.fixture
def served(tmp_path: Path) -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for server in started:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()


def test_sigterm_answers_long_polls_at_once(tmp_path: Path, served: list[Served]) -> None:
    server = Served(tmp_path)
    served.append(server)
    httpx.post(f"{server.url}/v1/topics/kept/jobs", json={"id": "k", "payload": 1, "delay": 3600})
    answers: list[tuple[float, httpx.Response]] = []

    def poll() -> None:
        answer = httpx.post(f"{server.url}/v1/topics/t/reserve", json={"wait": 50}, timeout=60)
        answers.append((time.monotonic(), answer))

    threads = [threading.Thread(target=poll) for _ in range(5)]
    for thread in threads:
        thread.start()
    time.sleep(1)  # all five waiting
    sent = time.monotonic()
    assert server.stop() in (0, -signal.SIGTERM)  # uvicorn ends by the signal it caught
    for thread in threads:
        thread.join(10)
    assert len(answers) == 5
    for at, answer in answers:
        assert answer.json() == {"jobs": []}
        assert at - sent < 5  # not the 50 s of their wait
    log = server.log.read_text()
    assert "Traceback" not in log and "ERROR" not in log, log
    # the store is as it was
    again = Served(tmp_path)
    served.append(again)
    job = httpx.get(f"{again.url}/v1/topics/kept/jobs/k").json()
    assert job["state"] == "delayed" and job["attempts"] == 0


def _counter(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    total = 0.0
    for line in text.splitlines():
        found = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
        if found and ",".join(sorted(found.group(1).split(","))) == want:
            total += float(found.group(2))
    return total


def test_workers_share_the_store_and_the_metrics(tmp_path: Path, served: list[Served]) -> None:
    server = Served(tmp_path, "--workers", "2")
    served.append(server)
    pids = set()
    with httpx.Client(base_url=server.url) as http:
        for i in range(40):
            # a new connection each time, so that both workers take some
            answer = httpx.post(f"{server.url}/v1/topics/w/jobs", json={"id": f"j{i}"})
            assert answer.status_code == 201
        assert http.get("/v1/topics/w/stats").json()["ready"] == 40
        for _ in range(10):
            text = httpx.get(f"{server.url}/metrics").text
            assert _counter(text, "chronoq_transitions_total", kind="put", topic="w") == 40
            assert _counter(text, "chronoq_jobs", state="ready", topic="w") == 40
        pids = {
            line.split("[")[1].split("]")[0]
            for line in server.log.read_text().splitlines()
            if "Started server process" in line
        }
    assert len(pids) == 2
    assert server.stop() == 0


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_tls(tmp_path: Path, served: list[Served]) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    server = Served(
        tmp_path, "--ssl-certfile", str(cert), "--ssl-keyfile", str(key), scheme="https"
    )
    served.append(server)
    answer = httpx.post(
        f"{server.url}/v1/topics/t/jobs",
        json={},
        verify=ssl.create_default_context(cafile=str(cert)),
    )
    assert answer.status_code == 201
    with pytest.raises(httpx.TransportError):  # plain HTTP is not served
        httpx.get(f"http://127.0.0.1:{server.port}/healthz", timeout=2)


def test_root_path_behind_a_proxy(tmp_path: Path, served: list[Served]) -> None:
    server = Served(tmp_path, "--root-path", "/queue")
    served.append(server)
    # a proxy that strips the prefix sends the path without it
    assert httpx.get(f"{server.url}/v1/topics").status_code == 200
    doc = httpx.get(f"{server.url}/openapi.json").json()
    assert "/v1/topics" in doc["paths"]
    # the dashboard's links are relative: they stay under the proxy's prefix
    moved = httpx.get(f"{server.url}/ui")
    assert moved.status_code == 308 and moved.headers["location"] == "ui/"
    assert httpx.get(f"{server.url}/ui/").status_code == 200
    assert httpx.get(f"{server.url}/ui/topics").status_code == 200
