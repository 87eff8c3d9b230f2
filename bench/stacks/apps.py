"""The candidate HTTP stacks for ``chronoq serve``, each serving the same two
routes, with no store behind them (what is measured is the stack's own cost):

- ``GET /hello``: a small JSON answer (the raw ASGI one is the baseline);
- ``POST /v1/topics/{topic}/jobs``: a put's body decoded and validated, and
  its answer encoded, as the real endpoint will (docs/contract.md §8).

Served by uvicorn (uvloop, httptools); see ``bench/stacks/run.py``.
"""

from __future__ import annotations

from typing import Any

import msgspec
from baseline import DUE_AT, raw  # noqa: F401 (served as apps:raw)
from fastapi import FastAPI
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

# -- Starlette + msgspec ------------------------------------------------------------------


class JobIn(msgspec.Struct, forbid_unknown_fields=True):
    payload: Any = None
    delay: float | None = None
    id: str | None = None
    priority: int = 0
    ttr: float = 30.0
    max_attempts: int = 5


class PutOut(msgspec.Struct):
    id: str
    created: bool
    due_at: int


_decode_job = msgspec.json.Decoder(JobIn).decode
_encode = msgspec.json.Encoder().encode


async def _hello_msgspec(request: Request) -> Response:
    return Response(_encode({"ok": True}), media_type="application/json")


async def _put_msgspec(request: Request) -> Response:
    job = _decode_job(await request.body())
    out = PutOut(job.id or "x", True, DUE_AT)
    return Response(_encode(out), status_code=201, media_type="application/json")


starlette_msgspec = Starlette(
    routes=[
        Route("/hello", _hello_msgspec),
        Route("/v1/topics/{topic}/jobs", _put_msgspec, methods=["POST"]),
    ]
)


# -- Starlette + pydantic --------------------------------------------------------------------


class JobModel(BaseModel, extra="forbid"):
    payload: Any = None
    delay: float | None = None
    id: str | None = None
    priority: int = 0
    ttr: float = 30.0
    max_attempts: int = 5


class PutModel(BaseModel):
    id: str
    created: bool
    due_at: int


async def _hello_pydantic(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def _put_pydantic(request: Request) -> Response:
    job = JobModel.model_validate_json(await request.body())
    out = PutModel(id=job.id or "x", created=True, due_at=DUE_AT)
    return Response(out.model_dump_json(), status_code=201, media_type="application/json")


starlette_pydantic = Starlette(
    routes=[
        Route("/hello", _hello_pydantic),
        Route("/v1/topics/{topic}/jobs", _put_pydantic, methods=["POST"]),
    ]
)


# -- FastAPI + pydantic, the idiomatic way (body model, response model) ------------------------

fastapi_pydantic = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)


@fastapi_pydantic.get("/hello")
async def _hello_fastapi() -> dict[str, bool]:
    return {"ok": True}


@fastapi_pydantic.post("/v1/topics/{topic}/jobs", status_code=201, response_model=PutModel)
async def _put_fastapi(topic: str, job: JobModel) -> PutModel:
    return PutModel(id=job.id or "x", created=True, due_at=DUE_AT)
