"""The ASGI app of /docs: the page (GET /docs), a redirect from /docs/, and
the page's static files under /docs/static/. Mounted in the service's App,
which has checked where the request came from (Host, Origin) before; the page
holds no data, so it needs no token, as /openapi.json does not.

Its own Content-Security-Policy, as strict as the dashboard's and stricter
where it can be: scripts and styles from this origin only (no inline script
or style, no eval: Swagger UI needs none of them, its style attributes are
set through the DOM, which a CSP allows), requests to this origin only (the
"try it" calls and /openapi.json), images from here or ``data:`` (Swagger
UI's icons are data: URLs in its CSS), no form submission, no frame."""

from __future__ import annotations

import html

from chronoq.server.docs_page.files import StaticFiles
from chronoq.server.ui.guard import security_headers
from chronoq.server.web.asgi import ASGIApp, Receive, Scope, Send, header, route_path
from chronoq.server.web.problems import ApiError
from chronoq.server.wire import ENCODER

__all__ = ["SECURITY_HEADERS", "docs_page"]

SECURITY_HEADERS = security_headers(b"'none'")  # the page has no form
_JS = b"text/javascript; charset=utf-8"
_CSS = b"text/css; charset=utf-8"
_FILES = {
    "swagger-ui-bundle.js": _JS,
    "swagger-ui.css": _CSS,
    "docs.js": _JS,
    "docs.css": _CSS,
}
_STATIC = b"/docs/static/"
_KEEP_A_DAY = (b"cache-control", b"public, max-age=86400")
_NO_STORE = (b"cache-control", b"no-store")

# every URL relative to the page at /docs, so that it stays under a proxy's prefix
_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>chronoq API reference</title>
<link rel="stylesheet" href="{swagger_css}">
<link rel="stylesheet" href="{docs_css}">
<script src="{swagger_js}" defer></script>
<script src="{docs_js}" defer></script>
</head>
<body>
<header><h1>chronoq API reference</h1>
<nav><a href="ui/">dashboard</a><a href="openapi.json">openapi.json</a></nav></header>
<div id="swagger-ui"><p class="loading">Loading the API reference…</p></div>
<noscript><p class="problem">This page needs JavaScript. The API's document is
<a href="openapi.json">openapi.json</a>.</p></noscript>
</body></html>
"""


def _accepts_gzip(accept_encoding: bytes | None) -> bool:
    """Whether an Accept-Encoding header takes gzip: named, or by ``*``, with
    a weight above 0."""
    weights: dict[str, float] = {}
    for item in (accept_encoding or b"").decode("latin-1").split(","):
        name, _, params = item.partition(";")
        weight = params.strip().lower().removeprefix("q=") or "1"
        try:
            weights[name.strip().lower()] = float(weight)
        except ValueError:  # a malformed weight: that coding is not taken
            weights[name.strip().lower()] = 0.0
    return weights.get("gzip", weights.get("*", 0.0)) > 0


async def _send(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]], *, head: bool
) -> None:
    start = [(b"content-length", str(len(body)).encode()), *headers, *SECURITY_HEADERS]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": b"" if head else body})


async def _problem(
    send: Send, problem: ApiError, *more: tuple[bytes, bytes], head: bool = False
) -> None:
    headers = [(b"content-type", b"application/json"), _NO_STORE, *problem.headers(), *more]
    await _send(send, problem.status, ENCODER.encode(problem.body()), headers, head=head)


class _DocsPage:
    def __init__(self) -> None:
        self.files = StaticFiles(__package__ or "chronoq.server.docs_page", _FILES, "docs/static/")
        self._page: bytes | None = None

    def page(self) -> bytes:
        if self._page is None:
            href = self.files.href
            links = {
                "swagger_css": href("swagger-ui.css"),
                "docs_css": href("docs.css"),
                "swagger_js": href("swagger-ui-bundle.js"),
                "docs_js": href("docs.js"),
            }
            self._page = _PAGE.format_map({k: html.escape(v) for k, v in links.items()}).encode()
        return self._page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        head = scope["method"] == "HEAD"
        if scope["method"] not in ("GET", "HEAD"):
            refusal = ApiError(405, "method_not_allowed", f"{scope['method']} is not allowed "
                               "here: the API reference is read with GET")  # fmt: skip
            await _problem(send, refusal, (b"allow", b"GET, HEAD"))
            return
        path = route_path(scope)
        if path == b"/docs":
            html_type = (b"content-type", b"text/html; charset=utf-8")
            await _send(send, 200, self.page(), [html_type, _NO_STORE], head=head)
        elif path == b"/docs/":  # the page's links are relative to /docs
            await _send(send, 308, b"", [(b"location", b"../docs"), _NO_STORE], head=head)
        elif path.startswith(_STATIC):
            await self._file(scope, send, path[len(_STATIC) :].decode("latin-1"), head=head)
        else:
            where = path.decode("latin-1")
            missing = ApiError(404, "no_such_route", f"no page at {where}: the reference is /docs")
            await _problem(send, missing, head=head)

    async def _file(self, scope: Scope, send: Send, name: str, *, head: bool) -> None:
        file = self.files.get(name)
        if file is None:
            missing = ApiError(404, "not_found", f"no static file {name!r}: the page /docs "
                               "names its files (with a hash of each in the URL)")  # fmt: skip
            await _problem(send, missing, head=head)
            return
        headers = [(b"content-type", file.content_type), _KEEP_A_DAY, (b"vary", b"accept-encoding")]
        body = file.data
        if _accepts_gzip(header(scope, b"accept-encoding")):
            body = await self.files.gzipped(file)
            headers.append((b"content-encoding", b"gzip"))
        await _send(send, 200, body, headers, head=head)


def docs_page() -> ASGIApp:
    """The ASGI app of the API reference, mounted at /docs/."""
    return _DocsPage()
