"""The Redis backend (``pip install chronoq[redis]``)."""

from chronoq.backends.redis.backend import RedisBackend

__all__ = ["RedisBackend"]
