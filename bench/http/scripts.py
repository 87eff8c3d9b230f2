"""wrk and its Lua scripts: one single put per request, one batch of 1,000
jobs per request, and reserve + ack pairs chained in Lua.

Every script ends with the same ``done()``: one line ``CHRONOQ {json}`` with
wrk's own counts (requests, duration, errors) and the counters the thread
kept (reserves, acks, empty reserves), which ``wrk()`` reads back."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PAYLOAD = {"order": 42, "kind": "close"}
DELAY = 60  # seconds: the puts schedule jobs, as chronoq's users do
BATCH = 1000  # jobs per jobs:batch request

# wrk runs one Lua state per thread, shared by all its connections; done()
# runs in the main state, which reaches each thread's globals through setup().
DONE = """
local threads = {}
function setup(thread) table.insert(threads, thread) end
function done(summary, latency, requests)
  local sum = {reserves = 0, acks = 0, empty = 0, bad = 0}
  for _, t in ipairs(threads) do
    for name, _ in pairs(sum) do sum[name] = sum[name] + (t:get(name) or 0) end
  end
  local e = summary.errors
  io.write(string.format(
    'CHRONOQ {"requests": %d, "duration_us": %d, "status_errors": %d, "socket_errors": %d, '
    .. '"p50_us": %d, "p99_us": %d, "reserves": %d, "acks": %d, "empty": %d, "bad": %d}\\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), sum.reserves, sum.acks, sum.empty, sum.bad))
end
"""


def _lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string of ASCII text is a valid Lua string literal


def put_script() -> str:
    body = json.dumps({"payload": PAYLOAD, "delay": DELAY})
    return f"""-- one put per request, a job due in {DELAY} s
wrk.method = "POST"
wrk.body = {_lua_string(body)}
wrk.headers["Content-Type"] = "application/json"
{DONE}"""


def batch_body(n: int = BATCH, delay: float | None = DELAY) -> bytes:
    extra = {} if delay is None else {"delay": delay}
    jobs = [{"payload": {**PAYLOAD, "n": i}, **extra} for i in range(n)]
    return json.dumps({"jobs": jobs}).encode()


def batch_script() -> str:
    return f"""-- one jobs:batch of {BATCH} jobs per request, each due in {DELAY} s
wrk.method = "POST"
wrk.body = {_lua_string(batch_body().decode())}
wrk.headers["Content-Type"] = "application/json"
{DONE}"""


def pair_script(topic: str) -> str:
    """A reserve of count 1; its answer's (id, lease) goes to a FIFO, and the
    next request of any connection of the thread acks the oldest one. So each
    connection alternates, about, and every lease reserved is acked once."""
    return f"""-- reserve (count 1) + ack pairs on topic {topic}
local topic = {_lua_string(topic)}
local base = "/v1/topics/" .. topic
local pending, head, tail = {{}}, 1, 0
reserves, acks, empty, bad = 0, 0, 0, 0

local function post(path, body)
  return wrk.format("POST", path, {{["Content-Type"] = "application/json"}}, body)
end

function request()
  if head <= tail then
    local job = pending[head]
    pending[head] = nil
    head = head + 1
    return post(base .. "/jobs/" .. job[1] .. "/ack", '{{"lease":"' .. job[2] .. '"}}')
  end
  return post(base .. "/reserve", '{{"count":1,"ttr":300}}')
end

function response(status, headers, body)
  if status ~= 200 then
    bad = bad + 1
  elseif body:sub(1, 8) == '{{"jobs":' then
    reserves = reserves + 1
    local id, lease = body:match('"id":"([^"]+)".-"lease":"([^"]+)"')
    if id then
      tail = tail + 1
      pending[tail] = {{id, lease}}
    else
      empty = empty + 1
    end
  else
    acks = acks + 1
  end
end
{DONE}"""


@dataclass(frozen=True)
class WrkRun:
    """What one wrk run did: requests and its own counters over ``seconds``."""

    requests: int
    seconds: float
    status_errors: int
    socket_errors: int
    p50_ms: float
    p99_ms: float
    counters: dict[str, int]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    def per_second(self, counter: str) -> float:
        return self.counters[counter] / self.seconds

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "seconds": self.seconds,
            "requests_per_s": self.rate,
            "status_errors": self.status_errors,
            "socket_errors": self.socket_errors,
            "latency_p50_ms": self.p50_ms,
            "latency_p99_ms": self.p99_ms,
            **{k: v for k, v in self.counters.items() if v},
        }


def wrk(url: str, seconds: float, connections: int, script: Path, pin: list[str]) -> WrkRun:
    """One wrk run (1 thread) of ``script`` against ``url``; fails on any
    error answer or socket error (a benchmark of failures measures nothing)."""
    command = [*pin, "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script)]
    out = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
    match = re.search(r"^CHRONOQ (\{.*\})$", out, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"wrk printed no figures:\n{out}")
    raw = json.loads(match.group(1))
    run = WrkRun(
        raw["requests"],
        raw["duration_us"] / 1e6,
        raw["status_errors"],
        raw["socket_errors"],
        raw["p50_us"] / 1000,
        raw["p99_us"] / 1000,
        {k: raw[k] for k in ("reserves", "acks", "empty", "bad")},
    )
    if run.status_errors or run.socket_errors or run.counters["bad"]:
        raise RuntimeError(f"errors from {url}:\n{out}")
    return run


def wrk_version() -> str:
    out = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout
    return out.split("[")[0].removeprefix("wrk").strip() or "unknown"
