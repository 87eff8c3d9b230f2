"""Clients of the HTTP API of ``chronoq serve`` (docs/contract.md §8): ``Client`` and,
for asyncio, ``AsyncClient``, with the method names, arguments, values and
typed errors of ``chronoq.Queue``, plus ``AuthError`` (401/403) and
``HTTPError`` (an answer no other error describes). See docs/clients.md."""

try:
    import httpx  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "chronoq.http needs httpx: pip install 'chronoq[server]' (or pip install httpx)"
    ) from exc

from chronoq.http.aclient import AsyncClient
from chronoq.http.client import Client
from chronoq.http.errors import AuthError, HTTPError

__all__ = ["AsyncClient", "AuthError", "Client", "HTTPError"]
