"""Bearer tokens: every route of the table, with no token, an unknown one,
and tokens of each action and of another topic glob. A token the route's
action and topic allow is never refused as 401/403; every other one is."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from chronoq.server import Action, Auth, ServerSettings, Token, hash_token, load_settings
from chronoq.server.web.routing import Route

from .live import LiveServer

SECRETS = {action: f"secret-{action.value}" for action in Action}
OTHER_TOPIC = "secret-elsewhere"  # allows everything, on billing.* only


def _settings() -> ServerSettings:
    tokens = [
        Token(action.value, hash_token(secret), ("orders.*",), frozenset({action}))
        for action, secret in SECRETS.items()
    ]
    tokens.append(Token("billing", hash_token(OTHER_TOPIC), ("billing.*",), frozenset(Action)))
    return ServerSettings(auth=Auth(tokens))


def _url(route: Route) -> str:
    return route.path.replace("{topic}", "orders.eu").replace("{id}", "j1")


def _call(http: httpx.Client, route: Route, token: str | None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    body = {} if route.method == "POST" else None
    return http.request(route.method, _url(route), json=body, headers=headers)


@pytest.fixture
def secured(serve: Callable[..., LiveServer]) -> LiveServer:
    return serve(_settings())


def test_the_auth_matrix(secured: LiveServer) -> None:
    routes = [r for r in secured.app.router.routes if r.action is not None]
    assert len(routes) >= 20
    with httpx.Client(base_url=secured.url, timeout=10) as http:
        for route in routes:
            where = f"{route.method} {route.path}"
            answer = _call(http, route, None)
            assert answer.status_code == 401, where
            assert answer.headers["www-authenticate"].startswith("Bearer")
            if route.envelope is None:  # else in its protocol's shape (test_youzan, _ouqiang)
                assert answer.json()["error"]["code"] == "unauthorized"
            assert _call(http, route, "not-a-token").status_code == 401, where
            if route.checks_in_handler:  # the body names the action: test_youzan.py
                continue
            for action, secret in SECRETS.items():
                status = _call(http, route, secret).status_code
                if action == route.action:
                    assert status not in (401, 403), f"{where} refused {action}: {status}"
                else:
                    assert status == 403, f"{where} let {action} through: {status}"
            if "{topic}" in route.path:
                assert _call(http, route, OTHER_TOPIC).status_code == 403, where


def test_open_routes_need_no_token(secured: LiveServer) -> None:
    with httpx.Client(base_url=secured.url) as http:
        assert http.get("/healthz").status_code == 200
        doc = http.get("/openapi.json").json()
        assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
        assert http.get("/metrics").status_code == 401


def test_topics_lists_only_what_the_token_may_read(secured: LiveServer) -> None:
    with httpx.Client(base_url=secured.url) as http:
        admin = {"authorization": f"Bearer {OTHER_TOPIC}"}
        http.post("/v1/topics/billing.x/jobs", json={}, headers=admin).raise_for_status()
        put = {"authorization": f"Bearer {SECRETS[Action.PUT]}"}
        http.post("/v1/topics/orders.x/jobs", json={}, headers=put).raise_for_status()
        read = {"authorization": f"Bearer {SECRETS[Action.READ]}"}
        assert http.get("/v1/topics", headers=read).json() == {"topics": ["orders.x"]}


def test_token_command_makes_a_working_config(
    tmp_path: Path, serve: Callable[..., LiveServer]
) -> None:
    made = subprocess.run(
        [sys.executable, "-m", "chronoq.cli.main", "token", "--name", "ci", "--topics",
         "orders.*", "--actions", "put,read"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    secret = made.stdout.split("):", 1)[1].split()[0]
    config = tmp_path / "chronoq.toml"
    config.write_text(made.stdout, encoding="utf-8")  # the secret is on a comment line
    assert secret not in "".join(
        line for line in made.stdout.splitlines() if not line.startswith("#")
    )
    server = serve(load_settings(config))
    with httpx.Client(base_url=server.url) as http:
        headers = {"authorization": f"Bearer {secret}"}
        assert http.post("/v1/topics/orders.a/jobs", json={}, headers=headers).status_code == 201
        assert http.post("/v1/topics/orders.a/reserve", json={}, headers=headers).status_code == 403


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[[tokens]]\nname='a'\nsha256='xyz'\nactions=['put']", "sha256"),
        ("[[tokens]]\nname='a'\nsha256='" + "0" * 64 + "'\nactions=['fly']", "actions"),
        ("[limits]\nmax_wait = -1", "max_wait"),
        ("[limits]\nmax_waitt = 1", "[limits] takes only"),
        ("[oops]", "unknown sections"),
        ("not toml", "not valid TOML"),
    ],
)
def test_bad_config_files_are_refused_clearly(tmp_path: Path, text: str, complaint: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "chronoq.cli.main", "serve", "--config", str(config)],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert complaint in run.stderr and "Traceback" not in run.stderr


def test_no_tokens_means_loopback_only(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "chronoq.cli.main", "serve", "--host", "0.0.0.0",
         "--store", f"sqlite:///{tmp_path / 'x.db'}"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert run.returncode == 2
    assert "refusing to listen on 0.0.0.0 without tokens" in run.stderr
