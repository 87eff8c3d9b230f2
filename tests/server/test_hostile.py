"""What a hostile client tried against ``chronoq serve`` (issue 24), replayed
against a real server on each backend: Host names that only look like
loopback, the server's own topics through a glob and through the
compatibility protocols, a foreign ``Referer``, ids that no URL can carry,
and the store's URL shown to strangers. The connection limits and the pop's
topic limit are in test_hostile_limits.py, the process's findings in
test_hostile_process.py, and a rebound name in Chromium in test_ui_browser.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

import chronoq
import chronoq.http
from chronoq.errors import InvalidInput
from chronoq.server import Action, Auth, ServerSettings, Token, hash_token

from .live import LiveServer, index_entry

ACT = {"hx-request": "true"}


def refused(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code, answer.text


@pytest.fixture
def live(server: LiveServer) -> LiveServer:
    return server


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=30) as client:
        yield client


# -- 1. the DNS-rebinding guard: loopback by address, not by prefix -------------------------


@pytest.mark.parametrize(
    "host",
    [
        "127.evil.example",  # the probe's name, which DNS may point at 127.0.0.1
        "127.0.0.1.evil.example",
        "localhost.evil.example",
        "127.1",  # not a literal address ipaddress reads: a browser never sends it
        "127.0.0.1:80.evil.example",
        "[::1].evil.example",
        "evil@127.0.0.1",
        "localhost.",
    ],
)
def test_a_name_that_only_looks_like_loopback_is_refused(
    live: LiveServer, http: httpx.Client, host: str
) -> None:
    port = live.url.rsplit(":", 1)[1]
    for shown in (host, f"{host}:{port}"):
        refused(http.get("/v1/topics", headers={"host": shown}), 403, "foreign_host")
        origin = {"host": shown, "origin": f"http://{shown}"}
        refused(http.post("/v1/topics/t/pause", headers=origin), 403, "foreign_host")
        refused(http.get("/ui/topics", headers={"host": shown}), 403, "foreign_host")
    assert http.get("/v1/topics/t/stats").json()["paused"] is False


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.0.0.1:{port}", "127.8.9.10:{port}", "localhost", "LocalHost:{port}",
             "[::1]", "[::1]:{port}"],
)  # fmt: skip
def test_loopback_names_are_answered(live: LiveServer, http: httpx.Client, host: str) -> None:
    shown = host.format(port=live.url.rsplit(":", 1)[1])
    assert http.get("/v1/topics", headers={"host": shown}).status_code == 200
    origin = {"host": shown, "origin": f"http://{shown}"}
    assert http.post("/v1/topics/t/pause", headers=origin).json() == {"paused": True}


# -- 3. the server's own topics: out of reach unless a glob names them ----------------------


def test_the_id_index_is_hidden_and_untouchable_without_tokens(
    http: httpx.Client, store_url: str
) -> None:
    pushed = http.post("/push", json={"topic": "secret.x", "id": "s1", "delay": 60, "ttr": 5})
    assert pushed.json()["code"] == 0
    assert index_entry(store_url, "s1") == {"topic": "secret.x"}
    assert http.get("/v1/topics").json() == {"topics": ["secret.x"]}
    for path in ("/v1/topics/chronoq.byid/jobs/s1", "/v1/topics/chronoq.byid/stats",
                 "/v1/topics/chronoq.byid/dead", "/ui/topics/chronoq.byid/delayed",
                 "/ui/topics/chronoq.byid", "/ui/job?topic=chronoq.byid&id=s1"):  # fmt: skip
        refused(http.get(path), 403, "internal_topic")
    refused(http.delete("/v1/topics/chronoq.byid/jobs/s1"), 403, "internal_topic")
    refused(http.post("/ui/topics/chronoq.byid/pause", headers=ACT), 403, "internal_topic")
    assert "chronoq.byid" not in http.get("/ui/topics").text
    assert "chronoq.byid" not in http.get("/metrics").text
    assert index_entry(store_url, "s1") == {"topic": "secret.x"}  # all as it was


def test_a_glob_reaches_the_server_s_own_topics_only_by_naming_them(
    serve: Callable[..., LiveServer], store_url: str
) -> None:
    def token(name: str, *globs: str) -> Token:
        return Token(name, hash_token(f"s-{name}"), globs, frozenset({Action.READ, Action.PUT}))

    tokens = [token("c", "c*"), token("all", "*"), token("named", "secret.*", "chronoq.*")]
    live = serve(ServerSettings(auth=Auth(tokens)))
    as_ = {t.name: {"authorization": f"Bearer s-{t.name}"} for t in tokens}
    with httpx.Client(base_url=live.url, timeout=30) as http:
        pushed = http.post(
            "/push",
            json={"topic": "secret.x", "id": "s1", "delay": 60, "ttr": 5},
            headers=as_["named"],
        )
        assert pushed.json()["code"] == 0
        for name in ("c", "all"):  # the probe's token, and one on every topic
            assert "chronoq.byid" not in http.get("/v1/topics", headers=as_[name]).text
            for path in ("/v1/topics/chronoq.byid/jobs/s1", "/ui/topics/chronoq.byid/delayed"):
                refused(http.get(path, headers=as_[name]), 403, "internal_topic")
            assert "chronoq.byid" not in http.get("/ui/topics", headers=as_[name]).text
        # a token whose glob names them reads them, and writes them no more than others
        named = as_["named"]
        assert "chronoq.byid" in http.get("/v1/topics", headers=named).json()["topics"]
        entry = http.get("/v1/topics/chronoq.byid/jobs/s1", headers=named).json()
        assert entry["payload"] == {"topic": "secret.x"}
        put = http.post("/v1/topics/chronoq.byid/jobs", json={"id": "x"}, headers=named)
        refused(put, 403, "internal_topic")
    assert index_entry(store_url, "x") is None


def test_the_compat_protocols_write_no_reserved_topic(http: httpx.Client) -> None:
    for topic in ("chronoq.healthz", "chronoq.events", "chronoq.byid"):
        push = http.post("/push", json={"topic": topic, "id": "h1", "delay": 1, "ttr": 5})
        assert push.status_code == 200 and push.json()["code"] == 1, push.text
        assert "chronoq's own" in push.json()["message"]
        add = http.post("/v1/command", json={"command": "add", "topic": topic, "id": "h2"})
        assert add.json()["success"] is False and "chronoq's own" in add.json()["error"]
        pop = http.post("/pop", json={"topic": f"ok,{topic}"})
        assert pop.json()["code"] == 1 and "chronoq's own" in pop.json()["message"]
        youzan = http.post("/v1/command", json={"command": "pop", "topic": topic})
        assert youzan.json()["success"] is False
    assert http.post("/get", json={"id": "h1"}).json()["data"] is None
    assert http.get("/v1/topics").json() == {"topics": []}


# -- 5. Referer names the site when Origin is missing ----------------------------------------


def test_a_change_with_a_foreign_referer_is_refused(live: LiveServer, http: httpx.Client) -> None:
    evil = {"referer": "http://evil.example/x"}
    refused(http.post("/v1/topics/t/pause", headers=evil), 403, "cross_origin")
    refused(http.post("/v1/topics/t/jobs", json={}, headers=evil), 403, "cross_origin")
    push = {"topic": "t", "id": "p1", "delay": 1, "ttr": 5}
    refused(http.post("/push", json=push, headers=evil), 403, "cross_origin")
    refused(http.post("/ui/topics/t/pause", headers={**ACT, **evil}), 403, "cross_origin")
    # another port of this host is another site too
    other = {"referer": "http://127.0.0.1:1/ui/"}
    refused(http.delete("/v1/topics/t/jobs/p1", headers=other), 403, "cross_origin")
    assert http.get("/v1/topics/t/stats").json()["total"] == 0
    # a read is no change; the server's own pages, and an Origin, decide as before
    assert http.get("/v1/topics", headers=evil).status_code == 200
    own = {"referer": f"{live.url}/ui/"}
    assert http.post("/v1/topics/t/pause", headers=own).json() == {"paused": True}
    both = {"origin": live.url, "referer": "http://evil.example/x"}
    assert http.post("/v1/topics/t/resume", headers=both).json() == {"paused": False}


# -- 6. ids no URL can carry ---------------------------------------------------------------


@pytest.mark.parametrize("job_id", [".", ".."])
def test_dot_ids_are_refused_by_every_put(http: httpx.Client, job_id: str) -> None:
    refused(http.post("/v1/topics/t/jobs", json={"id": job_id}), 400, "invalid_job")
    batch = {"jobs": [{"id": "fine"}, {"id": job_id}]}
    answer = http.post("/v1/topics/t/jobs:batch", json=batch)
    refused(answer, 400, "invalid_job")
    assert answer.json()["error"]["index"] == 1
    push = http.post("/push", json={"topic": "t", "id": job_id, "delay": 1, "ttr": 5})
    assert push.json()["code"] == 1 and "cannot be addressed in a URL" in push.json()["message"]
    add = http.post("/v1/command", json={"command": "add", "topic": "t", "id": job_id})
    assert add.json()["success"] is False
    assert http.get("/v1/topics/t/stats").json()["total"] == 0
    with chronoq.http.Client(str(http.base_url)) as client, pytest.raises(InvalidInput):
        client.put("t", 1, id=job_id)


def test_the_dashboard_encodes_each_segment_it_builds(http: httpx.Client, store_url: str) -> None:
    nasty = "a/b?c#d%e&f"
    with chronoq.connect(store_url) as queue:
        queue.put("enc", 1, id=nasty, delay=600)
    page = http.get("/ui/topics/enc/delayed").text
    assert 'hx-post="topics/enc/jobs/a%2Fb%3Fc%23d%25e%26f/run-now"' in page
    answer = http.post("/ui/topics/enc/jobs/a%2Fb%3Fc%23d%25e%26f/run-now", headers=ACT)
    assert answer.status_code == 200 and "due now" in answer.text
    assert http.get("/v1/topics/enc/stats").json()["ready"] == 1


# -- 7. the store's URL, shown only to whoever runs the server --------------------------------


def test_the_store_url_is_hidden_from_token_holders(
    serve: Callable[..., LiveServer], store_url: str
) -> None:
    tokens = [Token("ops", hash_token("s-ops"), ("*",), frozenset(Action))]
    live = serve(ServerSettings(auth=Auth(tokens)))
    kind = store_url.partition("://")[0]
    with httpx.Client(base_url=live.url, timeout=30) as http:
        assert http.get("/healthz").json() == {"ok": True, "store": kind}
        shell = http.get("/ui/").text
        assert f'<span class="store">{kind}</span>' in shell
        location = store_url.partition("://")[2].partition("?")[0]
        assert location not in shell and location not in http.get("/healthz").text


def test_without_tokens_the_store_url_is_shown(live: LiveServer, http: httpx.Client) -> None:
    url = live.app.queue.url
    assert http.get("/healthz").json() == {"ok": True, "store": url}
    assert f'<span class="store">{url}</span>' in http.get("/ui/").text
