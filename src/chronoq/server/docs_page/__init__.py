"""The interactive API reference at /docs: Swagger UI (the npm package
swagger-ui-dist, vendored unchanged in static/: see its README.md and
`make vendor-swagger-ui`) over the server's own /openapi.json, with its
"try it" calls sent to this server. Nothing is loaded from another site."""

from __future__ import annotations

from chronoq.server.docs_page.page import docs_page

__all__ = ["docs_page"]
