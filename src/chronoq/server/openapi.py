"""The OpenAPI 3.1 document, generated from the route table and the msgspec
types the server decodes and encodes with: what it describes is what runs."""

from __future__ import annotations

from typing import Any

from importlib.metadata import version

import msgspec

from chronoq.server.routing import Route

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{name}"


def _path_params(route: Route) -> list[dict[str, Any]]:
    names = [s[1:-1] for s in route.segments if s.startswith("{")]
    described = {
        "topic": ("A topic: 1-128 of A-Z a-z 0-9 . _ : -", r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"),
        "id": ("A job id: 1-256 printable ASCII characters, percent-encoded", r"^[!-~]{1,256}$"),
    }
    params = []
    for name in names:
        text, pattern = described.get(name, ("", ".+"))
        params.append(
            {
                "name": name,
                "in": "path",
                "required": True,
                "description": text,
                "schema": {"type": "string", "pattern": pattern},
            }
        )
    return params


def openapi_document(routes: list[Route], secured: bool) -> dict[str, Any]:
    shown = [route for route in routes if route.in_schema]
    types: list[Any] = []
    for route in shown:
        if route.body is not None:
            types.append(route.body)
        types.extend(route.answers.values())
    schemas, components = msgspec.json.schema_components(types, ref_template=_REF)
    at = iter(schemas)
    paths: dict[str, dict[str, Any]] = {}
    for route in shown:
        operation: dict[str, Any] = {
            "summary": route.summary,
            "operationId": f"{route.method.lower()}_{route.path}".replace("/", "_")
            .replace("{", "")
            .replace("}", "")
            .replace(":", "_")
            .replace(".", "_"),
            "tags": [route.tag],
        }
        params = _path_params(route) + [
            {
                "name": p.name,
                "in": "query",
                "required": False,
                "schema": p.schema,
                "description": p.description,
            }
            for p in route.query
        ]
        if params:
            operation["parameters"] = params
        if route.body is not None:
            operation["requestBody"] = {
                "required": False,
                "content": {"application/json": {"schema": next(at)}},
            }
        operation["responses"] = {
            str(status): {
                "description": "ok" if status < 400 else "an error",
                "content": {"application/json": {"schema": next(at)}},
            }
            for status in route.answers
        }
        if route.action is not None and secured:
            operation["security"] = [{"bearer": []}]
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "chronoq",
            "version": version("chronoq"),
            "description": "A delay queue over HTTP JSON: put jobs due later, reserve them "
            "under a lease, ack them. Times are ms since the Unix epoch; durations are "
            'seconds. Errors are {"error": {"code", "message"}}.',
        },
        "paths": paths,
        "components": {"schemas": components},
    }
    if secured:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    return doc
