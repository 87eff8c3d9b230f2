"""One ``chronoq serve`` process whose /v1 routes go through the web toolkit
named: ``own`` (the server's own dispatch, as ``chronoq serve`` runs it) or
the prototypes of bench/http/starlette_app.py. Every toolkit starts
the same way (serving.py's config: uvloop, httptools with its connection
bounds, no access log, no server header); only uvicorn's factory differs.

    python bench/http/toolkit_server.py --toolkit own|starlette|starlette-router \\
        --store URL --port P
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict

from chronoq.server.connections import ServerConfig
from chronoq.server.serving import ServeOptions, Server

FACTORIES = {
    "own": "chronoq.server.serving:app_from_env",
    "starlette": "starlette_app:starlette_app_from_env",
    "starlette-router": "starlette_app:router_app_from_env",
}
_OPTIONS_ENV = "CHRONOQ_SERVE_OPTIONS"  # what serving.app_from_env reads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--toolkit", choices=sorted(FACTORIES), required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    options = ServeOptions(store=args.store, port=args.port, log_level="warning")
    settings = options.settings()
    os.environ[_OPTIONS_ENV] = json.dumps(asdict(options))
    config = ServerConfig(
        FACTORIES[args.toolkit],
        limits=settings.limits,
        factory=True,
        host=options.host,
        port=options.port,
        loop="uvloop",
        access_log=False,
        log_level=options.log_level,
        timeout_graceful_shutdown=30,
        server_header=False,
    )
    Server(config).run()


if __name__ == "__main__":
    main()
