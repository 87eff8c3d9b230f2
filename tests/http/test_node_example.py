"""examples/node against a real server: the demo's round trip, and the
client's other calls and errors. Skipped without ``node`` on the PATH,
except in CI (``CI=true``), where a missing node fails."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import chronoq.http

from ..server.live import LiveServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "node"


@pytest.fixture
def node() -> str:
    binary = shutil.which("node")
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is not installed: the Node example cannot be checked")
        pytest.skip("node is not installed")
    return binary


def run_node(node: str, args: list[str], server: LiveServer, **env: str) -> dict[str, object]:
    done = subprocess.run(
        [node, *args],
        cwd=EXAMPLE,
        env={**os.environ, "CHRONOQ_URL": server.url, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout
    result: dict[str, object] = json.loads(lines[0])
    return result


def test_the_demo(node: str, server: LiveServer, topic: str) -> None:
    out = run_node(node, ["demo.mjs"], server, CHRONOQ_TOPIC=topic)
    assert out["topic"] == topic and out["created"] is True and out["acked"] is True
    assert out["payload"] == {"hello": "from node"} and out["attempts"] == 1
    assert 900 <= int(str(out["waited_ms"])) < 5000  # the long poll ended when the job was due
    assert out["second_ack"] == "lease_lost"
    with chronoq.http.Client(server.url) as client:
        assert client.get(topic, str(out["id"])) is None  # acked
        assert client.stats(topic)["total"] == 0


CALLS = """
import { Client, ChronoqError } from "./client.mjs";
const q = new Client(process.env.CHRONOQ_URL);
const t = process.env.CHRONOQ_TOPIC;
const out = {};
await q.put(t, new Uint8Array([0, 1, 255]), { id: "b/..", priority: 5, maxAttempts: 2 });
await q.put(t, "later", { id: "a/b?c", runAt: new Date(Date.now() + 3600_000) });
const [job] = await q.reserve(t, { count: 5, ttr: 60 });
out.id = job.id;
out.payload = [...job.payload];
out.touched = (await q.touch(job, { ttr: 120 })) > job.deadline;
out.nacked = await q.nack(job, { delay: 0, error: "try again" });
const [again] = await q.reserve(t);
out.attempts = again.attempts;
out.last = await q.nack(again, { error: new Error("broken") });
try { await q.ack(again); }
catch (err) { out.lost = [err instanceof ChronoqError, err.status, err.code]; }
try { await q.put(t, 1, { delay: -1 }); } catch (err) { out.invalid = [err.status, err.code]; }
try { await q.ack({ topic: t, id: "..", lease: "x" }); } catch (err) { out.dots = err.status; }
try { await new Client("http://127.0.0.1:9", { timeout: 2 }).put(t, 1); }
catch (err) { out.unreachable = [err.status, err.message.includes("chronoq serve")]; }
console.log(JSON.stringify(out));
"""


def test_the_clients_calls_and_errors(node: str, server: LiveServer, topic: str) -> None:
    out = run_node(node, ["--input-type=module", "-e", CALLS], server, CHRONOQ_TOPIC=topic)
    assert out == {
        "id": "b/..",
        "payload": [0, 1, 255],
        "touched": True,
        "nacked": "ready",
        "attempts": 2,
        "last": "dead",
        "lost": [True, 409, "lease_lost"],
        "invalid": [400, "invalid_input"],
        "unreachable": [0, True],
        "dots": 0,
    }
    with chronoq.http.Client(server.url) as client:
        [dead] = client.dead(topic)
        assert (dead.id, dead.payload, dead.last_error) == (
            "b/..",
            b"\x00\x01\xff",
            "Error: broken",
        )
        assert client.get(topic, "a/b?c") is not None
