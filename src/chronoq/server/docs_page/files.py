"""The packaged files of /docs (static/), read on first use rather than when
the app is made (a test suite makes hundreds of apps), each served under a URL
with a hash of its content, so a browser keeps it for a day and still gets a
new version at once; compressed with gzip for a browser that takes it, as
Swagger UI's script is 1.7 MB and 0.5 MB compressed."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources

__all__ = ["StaticFile", "StaticFiles"]


@dataclass
class StaticFile:
    data: bytes
    content_type: bytes
    version: str  # a hash of the content, for the URL
    gzipped: bytes | None = field(default=None, repr=False)  # made on the first request for it


class StaticFiles:
    def __init__(self, package: str, types: Mapping[str, bytes], url: str) -> None:
        """``types``: each file of ``package``'s static/ folder to serve, and
        its content type; ``url``: where the page finds them, relative to it."""
        self._package = package
        self._types = dict(types)
        self._url = url
        self._files: dict[str, StaticFile] | None = None

    def _loaded(self) -> dict[str, StaticFile]:
        if self._files is None:
            folder = resources.files(self._package) / "static"
            files = {}
            for name, kind in self._types.items():
                data = (folder / name).read_bytes()
                files[name] = StaticFile(data, kind, hashlib.sha256(data).hexdigest()[:12])
            self._files = files
        return self._files

    def href(self, name: str) -> str:
        """The file's URL, relative to the page."""
        return f"{self._url}{name}?v={self._loaded()[name].version}"

    def get(self, name: str) -> StaticFile | None:
        return self._loaded().get(name)

    async def gzipped(self, file: StaticFile) -> bytes:
        """The file compressed, made once, off the event loop (about 0.1 s
        for the big script). Two first requests at once both compress: the
        same bytes, no harm."""
        if file.gzipped is None:
            file.gzipped = await asyncio.to_thread(gzip.compress, file.data, 6, mtime=0)
        return file.gzipped
