"""Calls packed once per shard (packing.py) are the bytes redis-py would send."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from chronoq.backends.redis import packing
from chronoq.backends.redis.packing import Head, Packed, pack_args, unpacked

ARGS: list[list[Any]] = [
    [],
    ["0"],
    ["", b""],
    [b"\x00\r\n\xff", "é€", 7],
    [0, -1, 2**62, 1.5, "x" * 300, b"y" * 70_000],
]


def redis_py(*args: Any) -> bytes:
    return b"".join(redis.Connection().pack_command(*args))


@pytest.mark.parametrize("args", ARGS)
def test_a_packed_call_is_what_redis_py_sends(args: list[Any]) -> None:
    head = Head("FCALL", "lib_put", 2, "k1", "{t:0}:jobs", 100_000)
    call = Packed(head, args)
    assert call.wire() == redis_py("FCALL", "lib_put", 2, "k1", "{t:0}:jobs", 100_000, *args)
    assert call.as_tuple() == ("FCALL", "lib_put", 2, "k1", "{t:0}:jobs", 100_000, *args)


@pytest.mark.parametrize("args", ARGS)
def test_the_pure_python_packer_agrees_with_hiredis(
    args: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with_hiredis = pack_args(args)
    monkeypatch.setattr(packing, "_hiredis_pack", None)
    assert pack_args(args) == with_hiredis


def test_an_argument_redis_cannot_take_is_refused() -> None:
    with pytest.raises(TypeError, match="cannot send dict"):
        pack_args([{"a": 1}])


def test_a_cluster_link_gets_the_arguments_back() -> None:
    call = Packed(Head("FCALL", "f", 1, "{t:0}:jobs"), ["a"])
    assert unpacked([call, ("WAIT", 1, 10)]) == [
        ("FCALL", "f", 1, "{t:0}:jobs", "a"),
        ("WAIT", 1, 10),
    ]
