"""What every dashboard request passes before its route: /ui is sent to /ui/
(the page's links are relative to it), actions are refused in read-only
mode and unless htmx sent them, and every answer gets headers that keep the
page to its own scripts and out of other sites' frames.

Why the ``HX-Request`` header on actions: without auth nothing else tells a
click on the page from a form that another site posts to a server on
localhost. A cross-site request cannot carry a custom header without a
CORS preflight, which this server never grants; so no cookies and this
header are the CSRF defence."""

from __future__ import annotations

import msgspec

from chronoq.server.settings import ServerSettings
from chronoq.server.web.asgi import ASGIApp, Message, Receive, Scope, Send, header, route_path
from chronoq.server.web.problems import ApiError

__all__ = ["SECURITY_HEADERS", "guard", "security_headers"]


def security_headers(form_action: bytes) -> tuple[tuple[bytes, bytes], ...]:
    """The headers of a page of this server: its own scripts, styles and
    requests only, no framing; ``form_action`` where its forms may post."""
    return (
        (
            b"content-security-policy",
            b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            b"connect-src 'self'; form-action " + form_action + b"; base-uri 'none'; "
            b"frame-ancestors 'none'",
        ),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"x-frame-options", b"DENY"),
    )


SECURITY_HEADERS = security_headers(b"'self'")
_NO_STORE = (b"cache-control", b"no-store")


async def _answer(send: Send, status: int, body: bytes, *headers: tuple[bytes, bytes]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _refuse(send: Send, code: str, message: str) -> None:
    body = msgspec.json.encode(ApiError(403, code, message).body())
    await _answer(send, 403, body, (b"content-type", b"application/json"), *SECURITY_HEADERS)


def guard(app: ASGIApp, settings: ServerSettings) -> ASGIApp:
    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if route_path(scope) == b"/ui":
            # relative: right behind a proxy that serves the app under a prefix
            await _answer(send, 308, b"", (b"location", b"ui/"))
            return
        if scope["method"] == "POST":
            if settings.read_only_ui:
                await _refuse(send, "read_only", "the dashboard is read-only: it offers no action")
                return
            if header(scope, b"hx-request") != b"true":
                await _refuse(
                    send,
                    "forbidden",
                    "dashboard actions come from its page (with an HX-Request header); "
                    "scripts should use the /v1 API",
                )
                return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name == b"cache-control" for name, _ in headers):
                    headers.append(_NO_STORE)
                message["headers"] = headers + list(SECURITY_HEADERS)
            await send(message)

        await app(scope, receive, with_headers)

    return guarded
