"""``chronoq serve``: the HTTP JSON service (docs/contract.md §8), as an ASGI app."""

from chronoq.server.app import create_app
from chronoq.server.auth import Action, Auth, Token, hash_token, new_token
from chronoq.server.settings import ConfigError, Limits, ServerSettings, load_settings

__all__ = [
    "Action",
    "Auth",
    "ConfigError",
    "Limits",
    "ServerSettings",
    "Token",
    "create_app",
    "hash_token",
    "load_settings",
    "new_token",
]
