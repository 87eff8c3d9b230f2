"""The server's own small web layer, kept instead of a toolkit because it
costs a third of Starlette's CPU per request on the put and reserve paths
(docs/benchmarks.md, "Web toolkit (issue 26)"): the ASGI app with its
Host/Origin checks and size-limited body reading (``asgi.py``), one route
table (``routing.py``) from which the OpenAPI document is written
(``openapi.py``), and the error bodies ``{"error": {"code", "message"}}``
(``problems.py``)."""
