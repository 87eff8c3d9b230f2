"""The compatibility protocols: the Youzan design's JSON commands
(``youzan.py``) and ouqiang/delay-queue's paths (``ouqiang.py``), both over
one id index in the store (``byid.py``), mounted by ``routes.py``."""

from chronoq.server.compat.routes import compat_routes

__all__ = ["compat_routes"]
