"""The OpenAPI 3.1 document, generated from the route table and the msgspec
types the server decodes and encodes with: what it describes is what runs."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import msgspec

from chronoq.job import ID_PATTERN, NEW_ID_PATTERN, TOPIC_PATTERN, YEAR_10000
from chronoq.server.settings import Limits
from chronoq.server.web.routing import Route

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{name}"
ID_RULE = f"^{ID_PATTERN}$"
NEW_ID_RULE = f"^{NEW_ID_PATTERN}$"  # a put's id: not "." or ".."
# the answers whose meaning is the same on every route that lists them
_DESCRIBED = {
    413: "too large: a payload over the store's max_payload, or a body over the "
    "server's limits.max_body; nothing was written",
}


def _path_params(route: Route) -> list[dict[str, Any]]:
    names = [s[1:-1] for s in route.segments if s.startswith("{")]
    described = {
        "topic": ("A topic: 1-128 of A-Z a-z 0-9 . _ : -", f"^{TOPIC_PATTERN}$"),
        "id": ("A job id: 1-256 printable ASCII characters, percent-encoded", ID_RULE),
        "group": ("A group of the topic: 1-128 of A-Z a-z 0-9 . _ : -", f"^{TOPIC_PATTERN}$"),
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


def _given(*names: str) -> dict[str, Any]:
    """A schema matched when every one of ``names`` is there and not null."""
    return {"required": list(names), "properties": {n: {"not": {"type": "null"}} for n in names}}


def _integers(node: Any) -> None:
    """A number that must be a multiple of 1 is what JSON Schema calls an integer."""
    if isinstance(node, dict):
        if node.get("type") == "number" and node.get("multipleOf") == 1:
            node["type"] = "integer"
            del node["multipleOf"]
        for value in node.values():
            _integers(value)
    elif isinstance(node, list):
        for value in node:
            _integers(value)


def _nullable(schema: dict[str, Any], rules: dict[str, Any]) -> dict[str, Any]:
    """``rules`` added to the non-null branch of ``schema``."""
    for branch in schema.get("anyOf", [schema]):
        if branch.get("type") != "null":
            branch.update(rules)
    return schema


def _rules(components: dict[str, Any], limits: Limits) -> None:
    """What the msgspec types cannot say: this server's limits, and the
    fields that exclude each other."""

    def props(name: str) -> dict[str, Any]:
        return components[name]["properties"]  # type: ignore[no-any-return]

    for name in ("JobSpec", "PutJob"):
        props(name)["id"] = _nullable(props(name)["id"], {"pattern": NEW_ID_RULE})
    props("LeaseRefBody")["id"] = _nullable(props("LeaseRefBody")["id"], {"pattern": ID_RULE})
    for name in ("JobSpec", "PutJob", "RescheduleBody"):
        props(name)["run_at"] = _nullable(
            props(name)["run_at"], {"minimum": 0, "exclusiveMaximum": YEAR_10000}
        )
    props("Requeue")["ids"]["anyOf"][0]["items"]["pattern"] = ID_RULE
    props("ReserveBody")["count"]["maximum"] = limits.max_count
    props("ReserveBody")["wait"]["maximum"] = limits.max_wait
    props("BatchPut")["jobs"]["maxItems"] = limits.max_batch
    props("AckBatch")["leases"]["maxItems"] = limits.max_batch
    for name in ("JobSpec", "PutJob"):
        components[name]["allOf"] = [
            {"not": _given("delay", "run_at")},
            {"not": _given("payload", "payload_b64")},
        ]
    components["RescheduleBody"]["oneOf"] = [_given("delay"), _given("run_at")]


def openapi_document(routes: list[Route], secured: bool, limits: Limits) -> dict[str, Any]:
    shown = [route for route in routes if route.in_schema]
    types: list[Any] = []
    for route in shown:
        if route.body is not None:
            types.append(route.body)
        types.extend(route.answers.values())
    schemas, components = msgspec.json.schema_components(types, ref_template=_REF)
    _rules(components, limits)
    _integers(components)
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
                "required": p.required,
                "schema": p.schema,
                "description": p.description,
            }
            for p in route.query
        ]
        if params:
            operation["parameters"] = params
        if route.body is not None:
            body = next(at)
            named = components.get(body.get("$ref", "").rpartition("/")[2], {})
            operation["requestBody"] = {
                # an empty body reads as {}: it may be left out when no field is required
                "required": bool(named.get("required") or named.get("oneOf")),
                "content": {"application/json": {"schema": body}},
            }
        operation["responses"] = {
            str(status): {
                "description": _DESCRIBED.get(status, "ok" if status < 400 else "an error"),
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
