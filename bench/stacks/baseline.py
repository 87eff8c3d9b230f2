"""The baseline every HTTP benchmark compares with: a bare ASGI app serving
``GET /hello`` and a put-shaped ``POST``, with only the standard library, so
that ``make test``'s smoke run of ``bench/http`` needs none of the candidate
stacks of ``apps.py``.
"""

from __future__ import annotations

import json
from typing import Any

DUE_AT = 1_764_000_000_000

# -- a bare ASGI app ------------------------------------------------------

HELLO = json.dumps({"ok": True}).encode()
JSON_HEADERS = [(b"content-type", b"application/json")]


async def raw(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if scope["path"] == "/hello":
        status, answer = 200, HELLO
    else:
        job = json.loads(body)
        status = 201
        answer = json.dumps(
            {"id": job.get("id") or "x", "created": True, "due_at": DUE_AT}
        ).encode()
    await send({"type": "http.response.start", "status": status, "headers": JSON_HEADERS})
    await send({"type": "http.response.body", "body": answer})
