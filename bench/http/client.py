"""A minimal HTTP/1.1 JSON client on asyncio streams (run on uvloop): one
keep-alive connection, one request at a time. Far less work per request than
httpx, so that what the hand-over lag measures is the server's delay rather
than the client's; and 1,000 of them cost 1,000 sockets and nothing else."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import msgspec

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class HttpError(RuntimeError):
    pass


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int, host: str = "127.0.0.1") -> Connection:
        reader, writer = await asyncio.open_connection(host, port, limit=2**20)
        return cls(reader, writer)

    def send(self, path: str, body: Any) -> None:
        """Write a POST of ``body`` (JSON, or bytes sent as they are)."""
        data = body if isinstance(body, bytes) else _encode(body)
        head = (
            f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)

    async def answer(self) -> tuple[int, Any]:
        """The status and decoded JSON body of the next answer."""
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        body = await self.reader.readexactly(length) if length else b""
        return status, _decode(body) if body else None

    async def post(self, path: str, body: Any, expect: tuple[int, ...] = (200, 201)) -> Any:
        self.send(path, body)
        status, answer = await self.answer()
        if status not in expect:
            raise HttpError(f"POST {path}: {status} {answer}")
        return answer

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()
