"""What issue 24 found of ``chronoq serve`` as a process: a stop on SIGTERM
that ended with status 143, and a ``--store`` given before ``serve`` that was
ignored (the server served ./chronoq.db); the banner now names the store."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

import chronoq

from ..redis_server import RedisServer
from .live import ServeProcess, free_port


@pytest.fixture
def processes() -> Iterator[list[ServeProcess]]:
    started: list[ServeProcess] = []
    yield started
    for process in started:
        process.kill()


def test_sigterm_after_a_clean_drain_exits_0(tmp_path: Path, processes: list[ServeProcess]) -> None:
    server = ServeProcess(tmp_path)
    processes.append(server)
    assert httpx.post(f"{server.url}/v1/topics/t/jobs", json={}).status_code == 201
    assert server.stop() == 0
    log = server.log.read_text()
    assert "Traceback" not in log and "ERROR" not in log, log


@pytest.mark.parametrize("given", ["after", "before", "env"])
def test_every_form_of_the_store_option_reaches_the_store(
    tmp_path: Path, store_url: str, processes: list[ServeProcess], given: str
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    server = ServeProcess(tmp_path, store=store_url, given=given, cwd=cwd)
    processes.append(server)
    answer = httpx.post(f"{server.url}/v1/topics/where/jobs", json={"id": "here"})
    assert answer.status_code == 201
    with chronoq.connect(store_url) as queue:
        assert queue.get("where", "here") is not None  # in that store
    assert list(cwd.iterdir()) == []  # not in a ./chronoq.db of its own
    assert server.stop() == 0
    with chronoq.connect(store_url) as queue:
        shown = queue.url
    assert f"store {shown}" in server.log.read_text()  # the banner names it


def test_the_banner_hides_the_store_s_password(
    tmp_path: Path, processes: list[ServeProcess]
) -> None:
    secured = RedisServer(tmp_path / "redis")
    try:
        redis.Redis(port=secured.port).config_set("requirepass", "hunter2")
        url = f"redis://:hunter2@127.0.0.1:{secured.port}/0?prefix=banner"
        server = ServeProcess(tmp_path, store=url)
        processes.append(server)
        assert httpx.post(f"{server.url}/v1/topics/t/jobs", json={}).status_code == 201
        assert server.stop() == 0
        log = server.log.read_text()
        assert f"store redis://:***@127.0.0.1:{secured.port}/0" in log
        assert "hunter2" not in log
    finally:
        secured.stop()


def test_a_bad_store_url_exits_2_before_the_server_binds(tmp_path: Path) -> None:
    port = free_port()
    run = subprocess.run(
        [sys.executable, "-m", "chronoq.cli.main", "serve", "--store", "foo://x",
         "--port", str(port)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "unsupported store URL scheme 'foo'" in run.stderr
    assert "Traceback" not in run.stderr and "Uvicorn running" not in run.stderr
