"""The client of bench/http/versus.py: Python's ``http.client``, one
keep-alive connection per thread, one request at a time on each.

Run as a process of its own (``python versus_client.py SPEC``): it opens its
connections, prints ``ready``, waits for a line on stdin, then every thread
sends its pushes; it prints one JSON line: each thread's start and end on
CLOCK_MONOTONIC (one clock for every process of the machine), the requests
answered, the refused ones and the CPU time the process spent on them. ``versus.py`` starts
a few such processes so that 16 connections are not 16 threads behind one
GIL, and takes the rate over the first start to the last end."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parent))

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from versus_wire import KINDS, Kind

HEADERS = {"Content-Type": "application/json"}


@dataclass
class Tally:
    requests: int = 0
    refused: int = 0
    first_refusal: str = ""
    start: float = 0.0
    end: float = 0.0
    errors: list[str] = field(default_factory=list)


def push_many(
    conn: http.client.HTTPConnection, kind: Kind, topic: str, prefix: str, count: int, tally: Tally
) -> None:
    """``count`` requests of ``kind`` on ``conn``, ids ``prefix0``, ``prefix1``..."""
    path = kind.path(topic)
    for n in range(count):
        conn.request(kind.method, path, kind.body(topic, f"{prefix}{n}"), HEADERS)
        answer = conn.getresponse()
        data = answer.read()
        tally.requests += 1
        if not kind.accepted(answer.status, data):
            tally.refused += 1
            if not tally.first_refusal:
                tally.first_refusal = f"{answer.status} {data[:300]!r}"


def warm(port: int, kind: Kind, topic: str, prefix: str, count: int) -> Tally:
    """Unmeasured requests over one connection (a fresh server's first ones are slower)."""
    tally = Tally()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        push_many(conn, kind, topic, prefix, count, tally)
    finally:
        conn.close()
    return tally


def run(spec: dict[str, Any]) -> dict[str, Any]:
    kind = KINDS[spec["kind"]]
    jobs: list[tuple[str, int]] = [tuple(t) for t in spec["threads"]]  # type: ignore[misc]
    conns = [http.client.HTTPConnection("127.0.0.1", spec["port"], timeout=60) for _ in jobs]
    for conn in conns:
        conn.connect()
    tallies = [Tally() for _ in jobs]
    gate = threading.Barrier(len(jobs) + 1)

    def thread(conn: http.client.HTTPConnection, prefix: str, count: int, tally: Tally) -> None:
        gate.wait()
        tally.start = time.monotonic()
        try:
            push_many(conn, kind, spec["topic"], prefix, count, tally)
        except Exception as exc:  # reported to the parent, which fails the run
            tally.errors.append(repr(exc))
        tally.end = time.monotonic()

    threads = [
        threading.Thread(target=thread, args=(conn, prefix, count, tally))
        for conn, (prefix, count), tally in zip(conns, jobs, tallies, strict=True)
    ]
    for t in threads:
        t.start()
    print("ready", flush=True)
    sys.stdin.readline()
    cpu = time.process_time()
    gate.wait()
    for t in threads:
        t.join()
    cpu = time.process_time() - cpu
    for conn in conns:
        conn.close()
    return {
        "starts": [t.start for t in tallies],
        "ends": [t.end for t in tallies],
        "requests": sum(t.requests for t in tallies),
        "refused": sum(t.refused for t in tallies),
        "first_refusal": next((t.first_refusal for t in tallies if t.first_refusal), ""),
        "errors": [e for t in tallies for e in t.errors],
        "cpu_s": cpu,  # from the go to the last answer
    }


if __name__ == "__main__":
    print(json.dumps(run(json.loads(sys.argv[1]))), flush=True)
