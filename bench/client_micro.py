"""Microbenchmark of the per-job Python work on the client: id generation, the
Redis id codec and job validation. These bound put_many and reserve + ack
throughput, so a change to them is measured here before the full benchmark.

    .venv/bin/python bench/client_micro.py [--repeat N]

Prints the best of ``N`` timeit runs (default 7) per function, in µs per call.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, bench/ comes first on sys.path, where ``import redis`` (inside
# chronoq's Redis backend) would find bench/redis.py instead of redis-py.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse
import timeit
from collections.abc import Callable
from typing import Any

from chronoq.backends.redis.codec import id_key, key_id
from chronoq.backends.redis.keys import shard_of
from chronoq.ids import encode, new_id
from chronoq.job import Job, encode_payload, prepare_job

PAYLOAD = {"order": 42, "kind": "close"}  # the payload of bench/common.py
ULID = "01J9ZQ8W5X3K7M2N4P6R8T0V1W"
KEY = id_key(ULID)
MAX = 1 << 20


def cases() -> list[tuple[str, Callable[[], Any]]]:
    job = Job(PAYLOAD)
    delayed = Job(PAYLOAD, delay=1.5, id="order-42", priority=3)
    value = int.from_bytes(KEY[1:], "big")
    return [
        ("new_id()", new_id),
        ("ids.encode(128-bit int)", lambda: encode(value)),
        ("id_key(ulid)", lambda: id_key(ULID)),
        ("id_key(text id)", lambda: id_key("order-42")),
        ("key_id(17-byte key)", lambda: key_id(KEY)),
        ("key_id(text key)", lambda: key_id(b"order-42")),
        ("shard_of(ulid, 1)", lambda: shard_of(ULID, 1)),
        ("shard_of(ulid, 4)", lambda: shard_of(ULID, 4)),
        ("encode_payload(small dict)", lambda: encode_payload(PAYLOAD, MAX)),
        ("prepare_job(Job(small dict))", lambda: prepare_job(job, MAX, 3)),
        ("prepare_job(delay, id, priority)", lambda: prepare_job(delayed, MAX, 3)),
    ]


def per_call_us(fn: Callable[[], Any], repeat: int) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()  # enough calls for >= 0.2 s per run
    return min(timer.repeat(repeat, number)) / number * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="timeit runs per case (best kept)")
    args = parser.parse_args(argv)
    print(f"Python {sys.version.split()[0]}, best of {args.repeat}, µs per call")
    for name, fn in cases():
        print(f"{name:36} {per_call_us(fn, args.repeat):7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
