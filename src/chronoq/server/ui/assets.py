"""The dashboard's static files (static/: htmx, its script, its style), read
once from the package and served with a content hash in their URL, so a
browser may keep them for a day and still gets a new version at once."""

from __future__ import annotations

import hashlib
from importlib import resources

from chronoq.server.web.problems import ApiError
from chronoq.server.web.routing import Call, Reply

__all__ = ["Assets"]

_FILES = {
    "htmx.min.js": b"text/javascript; charset=utf-8",
    "dashboard.js": b"text/javascript; charset=utf-8",
    "dashboard.css": b"text/css; charset=utf-8",
}
_CACHE = (b"cache-control", b"public, max-age=86400")


class Assets:
    def __init__(self) -> None:
        folder = resources.files(__package__ or "chronoq.server.ui") / "static"
        self._files = {name: (folder / name).read_bytes() for name in _FILES}
        self._versions = {
            name: hashlib.sha256(data).hexdigest()[:12] for name, data in self._files.items()
        }

    def href(self, name: str) -> str:
        """The file's URL, relative to the page."""
        return f"static/{name}?v={self._versions[name]}"

    async def serve(self, call: Call) -> Reply:
        name = call.param("name")
        data = self._files.get(name)
        if data is None:
            raise ApiError(404, "not_found", f"no static file {name!r}")
        return Reply(200, data, content_type=_FILES[name], headers=(_CACHE,))
