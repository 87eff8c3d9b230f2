"""The wheel as a user installs it, used as a user would: ``make smoke`` installs
dist/chronoq-*.whl with ``[server,redis]`` (not editable) into a new virtualenv
outside the checkout and runs this file with that virtualenv's python, as
``python -I`` from a directory outside the checkout: neither this file's
folder, nor $PYTHONPATH, nor the working directory is on ``sys.path``, so
``import chronoq`` can find only what pip installed.

It checks: chronoq comes from the virtualenv's site-packages, not from the
checkout; a put, a delayed put, reserve and ack on SQLite and on a private
redis-server (a free loopback port, never 6379); the Lua library Redis runs is
the installed .lua files; the installed ``chronoq serve`` answers /healthz, the
dashboard /ui/ with its static files, /openapi.json, a put and reserve over
HTTP, and the dashboard's fragments of that topic (its installed templates);
with ``--docs``, also the API reference page /docs (``chronoq serve`` gains it
in issue 26; the Makefile passes ``--docs`` from then on).

Not a pytest module: pytest would import the checkout's chronoq. Every process
it starts is stopped on the way out, on a failure or SIGTERM too."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from importlib import metadata
from importlib.resources import files
from pathlib import Path
from typing import Any

import chronoq

START_TIMEOUT_S = 30  # how long a starting server may take to answer before the smoke fails


class SmokeFailure(Exception):
    """A check failed: the message says which and what was seen."""


def expect(condition: bool, failure: str) -> None:
    if not condition:
        raise SmokeFailure(failure)


def step(name: str, check: Callable[[], None]) -> None:
    started = time.monotonic()
    check()
    print(f"smoke: {name}: ok ({time.monotonic() - started:.2f} s)", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- where chronoq comes from -------------------------------------------------


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"]).resolve()


def check_installed(checkout: Path | None) -> None:
    site = site_packages()
    package = Path(chronoq.__file__).resolve().parent
    expect(sys.prefix != sys.base_prefix, f"not run in a virtualenv: {sys.executable}")
    expect(package.is_relative_to(site), f"chronoq imported from {package}, not from {site}")
    if checkout is not None:
        inside = [e for e in sys.path if Path(e or ".").resolve().is_relative_to(checkout)]
        expect(not inside, f"sys.path reaches into the checkout {checkout}: {inside}")
        expect(not package.is_relative_to(checkout), "chronoq imported from the checkout")
    installed = metadata.distribution("chronoq")
    direct = json.loads(installed.read_text("direct_url.json") or "{}")
    expect(
        not direct.get("dir_info", {}).get("editable", False),
        f"chronoq is an editable install ({direct}), not the wheel",
    )
    expect(
        installed.version == chronoq.__version__,
        f"the wheel's version {installed.version} is not chronoq.__version__ {chronoq.__version__}",
    )
    print(f"smoke: chronoq {installed.version} from {package}")


# -- the queue on a store -------------------------------------------------------


def put_reserve_ack(url: str) -> None:
    """A job due now and a delayed one, each reserved (the delayed one by a
    reserve that waits for its due time) and acked; the topic is empty after."""
    with chronoq.connect(url) as queue:
        queue.put("smoke", {"n": 1}, id="now")
        queue.put("smoke", {"n": 2}, id="later", delay=0.3)
        seen = []
        for _ in range(2):
            [job] = queue.reserve("smoke", wait=START_TIMEOUT_S)
            seen.append((job.id, job.payload))
            queue.ack(job)
        expect(
            sorted(seen) == [("later", {"n": 2}), ("now", {"n": 1})],
            f"{url}: reserved {seen}, expected the jobs now and later",
        )
        stats = queue.stats("smoke")
        expect(stats["total"] == 0, f"{url}: jobs left after the acks: {stats}")


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[int]:
    """A private redis-server on a free loopback port (never the machine's 6379)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SmokeFailure("redis-server is not installed: `make system-deps` installs it")
    port = free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir)]
    args += ["--save", "", "--appendonly", "no", "--logfile", str(workdir / "redis.log")]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: redis_answers(port), process, f"redis-server on port {port}")
        yield port
    finally:
        stop(process)


def redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def installed_lua() -> dict[str, str]:
    """The installed .lua files, by their path under lua/, read from disk."""
    lua = Path(str(files("chronoq.backends.redis").joinpath("lua"))).resolve()
    expect(lua.is_relative_to(site_packages()), f"the Lua files are read from {lua}")
    found = {path.relative_to(lua).as_posix(): path.read_text() for path in lua.rglob("*.lua")}
    expect(bool(found), f"no .lua files in {lua}")
    return found


def check_lua_library(port: int) -> None:
    """The one chronoq library Redis holds is the installed files: each file's
    text is in its code, and each top-level file is one of its functions."""
    import redis  # the redis extra

    with redis.Redis(host="127.0.0.1", port=port) as client:
        libraries = [
            dict(zip(lib[::2], lib[1::2], strict=True))
            for lib in client.function_list(withcode=True)
        ]
    expect(len(libraries) == 1, f"expected one function library, Redis holds {len(libraries)}")
    [library] = libraries
    name = library[b"library_name"].decode()
    code = library[b"library_code"].decode()
    functions = {
        dict(zip(f[::2], f[1::2], strict=True))[b"name"].decode() for f in library[b"functions"]
    }
    lua = installed_lua()
    absent = sorted(path for path, text in lua.items() if text not in code)
    expect(not absent, f"the library {name} lacks the installed {absent}")
    wanted = {f"{name}_{path[:-4]}" for path in lua if "/" not in path}
    expect(functions == wanted, f"the library's functions {functions} are not {wanted}")
    print(f"smoke: Redis runs {name}: {len(functions)} functions from {len(lua)} installed files")


# -- chronoq serve --------------------------------------------------------------


def wait_until(ready: Callable[[], bool], process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if process.poll() is not None:
            raise SmokeFailure(f"{what} exited with {process.returncode} before answering")
        if time.monotonic() > deadline:
            raise SmokeFailure(f"{what} did not answer within {START_TIMEOUT_S} s")
        time.sleep(0.05)


def stop(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait(10)


@contextlib.contextmanager
def chronoq_serve(workdir: Path) -> Iterator[str]:
    """The installed console script ``chronoq serve`` on a free loopback port,
    on a SQLite file in ``workdir``; its base URL."""
    script = Path(sys.executable).parent / "chronoq"
    expect(script.is_file(), f"no chronoq console script at {script}")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    store = f"sqlite:///{workdir / 'serve.db'}"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CHRONOQ_STORE")}
    log = workdir / "serve.log"
    with log.open("wb") as out:
        command = [str(script), "serve", "--host", "127.0.0.1", "--port", str(port)]
        process = subprocess.Popen(
            [*command, "--store", store], stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir
        )
    try:
        wait_until(lambda: answers(f"{base}/healthz"), process, f"chronoq serve on {base}")
        yield base
    except BaseException:
        print(f"smoke: chronoq serve's output:\n{log.read_text()}", flush=True)
        raise
    finally:
        code = stop(process)
    output = log.read_text()
    expect(code in (0, -signal.SIGTERM), f"chronoq serve exited with {code}:\n{output}")
    expect("Traceback" not in output, f"chronoq serve logged a traceback:\n{output}")


def answers(url: str) -> bool:
    try:
        return fetch(url)[0] == 200
    except OSError:
        return False


def fetch(url: str, body: Any = None) -> tuple[int, str, str]:
    """Status, content type and text of a GET (or of a POST of ``body`` as JSON)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=START_TIMEOUT_S) as reply:
            return reply.status, reply.headers.get("content-type", ""), reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("content-type", ""), error.read().decode()


def check_page(base: str, path: str) -> None:
    """An HTML page answers 200, and so does every script and stylesheet it
    loads, all served by chronoq itself (no CDN)."""
    status, kind, text = fetch(base + path)
    expect(status == 200 and kind.startswith("text/html"), f"{path}: {status} {kind}")
    expect("<html" in text.lower(), f"{path} is not an HTML page: {text[:200]!r}")
    assets = re.findall(r"<script[^>]*\ssrc=\"([^\"]+)\"", text)
    assets += re.findall(r"<link[^>]*\shref=\"([^\"]+)\"", text)
    remote = [asset for asset in assets if re.match(r"(https?:)?//", asset)]
    expect(not remote, f"{path} loads files from elsewhere: {remote}")
    for asset in assets:
        url = urllib.parse.urljoin(base + path, asset)
        status, kind, _ = fetch(url)
        expect(status == 200, f"{path} loads {asset}: {url} answers {status}")
    print(f"smoke: {path} and its {len(assets)} scripts and stylesheets answer 200")


def check_fragments(base: str) -> None:
    """The dashboard's fragments, drawn by the installed templates."""
    for path, wanted in [
        ("/ui/topics", 'data-topic="smoke"'),
        ("/ui/topics/smoke", 'id="summary"'),
        ("/ui/job?topic=smoke&id=over-http", 'id="job-view"'),
    ]:
        status, kind, text = fetch(base + path)
        expect(status == 200 and kind.startswith("text/html"), f"{path}: {status} {kind}")
        expect(wanted in text, f"{path} lacks {wanted}: {text[:300]!r}")
    print("smoke: the dashboard's fragments answer from the installed templates")


def check_json(base: str, path: str, body: Any = None, status: int = 200) -> Any:
    answered, kind, text = fetch(base + path, body)
    expect(answered == status, f"{path}: {answered} (not {status}) {text[:300]}")
    expect(kind.startswith("application/json"), f"{path}: content type {kind}")
    return json.loads(text)


def check_serve(base: str, docs: bool) -> None:
    health = check_json(base, "/healthz")
    expect(health.get("ok") is True, f"/healthz answered {health}")
    print(f"smoke: /healthz {health}")
    check_page(base, "/ui/")
    document = check_json(base, "/openapi.json")
    expect("/v1/topics/{topic}/jobs" in document.get("paths", {}), "/openapi.json lacks the put")
    check_json(base, "/v1/topics/smoke/jobs", {"id": "over-http", "payload": {"n": 3}}, 201)
    reserved = check_json(base, "/v1/topics/smoke/reserve", {"wait": START_TIMEOUT_S})
    ids = [job["id"] for job in reserved["jobs"]]
    expect(ids == ["over-http"], f"the reserve over HTTP answered {reserved}")
    check_fragments(base)
    if docs:
        check_page(base, "/docs")


# -- the run --------------------------------------------------------------------


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, help="the checkout chronoq must not come from")
    parser.add_argument("--docs", action="store_true", help="check the /docs page too")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> None:
    checkout = args.checkout.resolve() if args.checkout else None
    step("installed from the wheel", lambda: check_installed(checkout))
    with tempfile.TemporaryDirectory(prefix="chronoq-smoke-") as tmp:
        work = Path(tmp)
        step("SQLite put/reserve/ack", lambda: put_reserve_ack(f"sqlite:///{work / 'smoke.db'}"))
        with redis_server(work) as port:
            step("Redis put/reserve/ack", lambda: put_reserve_ack(f"redis://127.0.0.1:{port}/0"))
            step("Lua library from the installed files", lambda: check_lua_library(port))
        with chronoq_serve(work) as base:
            step("chronoq serve", lambda: check_serve(base, args.docs))


def main(argv: list[str]) -> int:
    # make stops a recipe with SIGTERM: leave through the `finally`s that stop the servers
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    started = time.monotonic()
    try:
        run(arguments(argv))
    except SmokeFailure as failure:
        print(f"smoke: FAILED: {failure}", flush=True)
        return 1
    print(f"smoke: all checks passed in {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
