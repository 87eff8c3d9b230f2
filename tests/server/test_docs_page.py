"""The API reference page at /docs over real HTTP: the page and its files,
their types, caching, compression and security headers; nothing loaded from
another site; no token needed with tokens on; the vendored Swagger UI is the
pinned version its README and the Makefile name; the banner and the
dashboard link to it. Its behaviour in a browser: test_docs_page_browser.py."""

from __future__ import annotations

import gzip
import hashlib
import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import httpx
import pytest

from chronoq.server import Action, Auth, ServerSettings, Token, hash_token
from chronoq.server.docs_page.page import _accepts_gzip

from .live import LiveServer, ServeProcess, start_server

ROOT = Path(__file__).resolve().parents[2]
STATIC = resources.files("chronoq.server.docs_page") / "static"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
)
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
PUTTER = "putter-token"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # SQLite: the page is the same on every store
    server = start_server(f"sqlite:///{tmp_path_factory.mktemp('docs') / 'docs.db'}")
    yield server
    server.stop()


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=30) as client:
        yield client


def links(page: str) -> list[str]:
    return re.findall(r"""(?:src|href)="([^"]*)\"""", page)


def assets(page: str) -> list[str]:
    return [link for link in links(page) if link.startswith("docs/static/")]


def test_the_page_and_its_headers(http: httpx.Client) -> None:
    page = http.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["content-security-policy"] == CSP
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["cache-control"] == "no-store"
    assert "<title>chronoq API reference</title>" in page.text
    assert '<a href="openapi.json">' in page.text and '<a href="ui/">' in page.text
    # the script and style of the page are files: the CSP allows nothing inline
    assert not re.search(r"<script(?![^>]*\ssrc=)[^>]*>", page.text)
    assert "<style" not in page.text and "style=" not in page.text
    assert sorted(a.split("?")[0] for a in assets(page.text)) == [
        "docs/static/docs.css",
        "docs/static/docs.js",
        "docs/static/swagger-ui-bundle.js",
        "docs/static/swagger-ui.css",
    ]


def test_nothing_comes_from_another_site(http: httpx.Client) -> None:
    page = http.get("/docs").text
    for link in links(page):  # relative: to this server, under a proxy's prefix too
        assert not re.match(r"[a-z]+:|/", link), link
    for ours in ("docs.js", "docs.css"):
        assert "://" not in (STATIC / ours).read_text(), ours
    assert "validatorUrl: null" in (STATIC / "docs.js").read_text()  # no swagger.io badge


def test_the_files_answer_with_their_types_and_are_kept_a_day(http: httpx.Client) -> None:
    for asset in assets(http.get("/docs").text):
        name = asset.split("?")[0].rpartition("/")[2]
        data = (STATIC / name).read_bytes()
        plain = http.get(f"/{asset}", headers={"accept-encoding": "identity"})
        assert plain.status_code == 200, asset
        assert plain.headers["content-type"] == TYPES[Path(name).suffix]
        assert plain.headers["cache-control"] == "public, max-age=86400"
        assert plain.headers["vary"] == "accept-encoding"
        assert "content-encoding" not in plain.headers
        assert plain.content == data
        # the URL carries a hash of the content: a new version is a new URL
        assert asset.endswith(f"?v={hashlib.sha256(data).hexdigest()[:12]}")


def test_a_browser_that_takes_gzip_gets_the_files_compressed(http: httpx.Client) -> None:
    asset = next(a for a in assets(http.get("/docs").text) if "swagger-ui-bundle.js" in a)
    data = (STATIC / "swagger-ui-bundle.js").read_bytes()
    for _ in range(2):  # compressed on the first request, kept for the next ones
        with http.stream("GET", f"/{asset}", headers={"accept-encoding": "br, gzip"}) as answer:
            raw = b"".join(answer.iter_raw())
        assert answer.headers["content-encoding"] == "gzip"
        assert int(answer.headers["content-length"]) == len(raw) < len(data) // 2
        assert gzip.decompress(raw) == data


@pytest.mark.parametrize(
    ("header", "takes"),
    [
        ("gzip", True),
        ("gzip, deflate, br", True),
        ("br;q=1.0, GZIP;q=0.5", True),
        ("*", True),
        ("gzip;q=0", False),
        ("gzip;q=0.000, *", False),
        ("*;q=0", False),
        ("identity", False),
        ("gzip;q=nonsense", False),
        ("", False),
    ],
)
def test_accept_encoding(header: str, takes: bool) -> None:
    assert _accepts_gzip(header.encode()) is takes


def test_the_other_paths(http: httpx.Client) -> None:
    moved = http.get("/docs/")
    assert moved.status_code == 308
    assert moved.headers["location"] == "../docs"  # relative: under a proxy's prefix too
    assert str(httpx.URL("http://h/queue/docs/").join(moved.headers["location"])) == (
        "http://h/queue/docs"
    )
    head = http.head("/docs")
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) == len(http.get("/docs").content)
    posted = http.post("/docs")
    assert posted.status_code == 405 and posted.headers["allow"] == "GET, HEAD"
    assert posted.json()["error"]["code"] == "method_not_allowed"
    # the licence files are in the package, not on the web; a name is not a path
    for missing in ("swagger-ui-LICENSE", "README.md", "../page.py", "%2e%2e/page.py", ""):
        answer = http.get(f"/docs/static/{missing}")
        assert answer.status_code == 404, missing
        assert answer.json()["error"]["code"] in ("not_found", "no_such_route")
    other = http.get("/docs/elsewhere")
    assert other.status_code == 404 and "/docs" in other.json()["error"]["message"]
    assert http.get("/docsx").status_code == 404  # another path, not the page


def test_a_foreign_host_gets_no_page(http: httpx.Client) -> None:
    """DNS rebinding: the page is refused like the rest of a server without tokens."""
    answer = http.get("/docs", headers={"host": "127.evil.example"})
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "foreign_host"


def test_with_tokens_the_page_needs_none_and_offers_bearer_auth(tmp_path: Path) -> None:
    tokens = [Token("putter", hash_token(PUTTER), ("*",), frozenset({Action.PUT}))]
    server = start_server(f"sqlite:///{tmp_path / 'auth.db'}", ServerSettings(auth=Auth(tokens)))
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            page = http.get("/docs")
            assert page.status_code == 200
            for asset in assets(page.text):
                assert http.get(f"/{asset}").status_code == 200, asset
            document = http.get("/openapi.json").json()
            assert document["components"]["securitySchemes"] == {
                "bearer": {"type": "http", "scheme": "bearer"}
            }
            put = document["paths"]["/v1/topics/{topic}/jobs"]["post"]
            assert put["security"] == [{"bearer": []}]
            assert http.post("/v1/topics/t/jobs", json={}).status_code == 401
    finally:
        server.stop()


def test_the_dashboard_links_the_page(http: httpx.Client) -> None:
    shell = http.get("/ui/").text
    assert '<a class="docs-link" href="../docs">API reference</a>' in shell
    # from /ui/ the link is /docs, under a proxy's prefix too
    assert str(httpx.URL("http://h/queue/ui/").join("../docs")) == "http://h/queue/docs"


def test_the_banner_names_the_page(tmp_path: Path) -> None:
    server = ServeProcess(tmp_path, "--root-path", "/queue")
    try:
        banner = server.log.read_text()
        assert f"docs {server.url}/queue/docs" in banner
        # the proxy strips the prefix; the page is there
        assert httpx.get(f"{server.url}/docs").status_code == 200
    finally:
        assert server.stop() == 0


def test_the_vendored_swagger_ui_is_the_pinned_one() -> None:
    """static/README.md names the version and each file's sha256; the
    Makefile, which re-vendors it, pins the same version."""
    readme = (STATIC / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    [pinned] = re.findall(r"^SWAGGER_UI_VERSION\s*:=\s*(\S+)$", makefile, re.M)
    assert f"swagger-ui-dist@{pinned}" in readme and f"Swagger UI {pinned}" in readme
    assert f"swagger-ui-dist@{pinned}" in (ROOT / "NOTICE").read_text()
    named = dict(re.findall(r"`([\w.-]+)` sha256\s+`([0-9a-f]{64})`", readme))
    assert set(named) == {"swagger-ui-bundle.js", "swagger-ui.css"}
    for name, digest in named.items():
        assert hashlib.sha256((STATIC / name).read_bytes()).hexdigest() == digest, name
    licence = (STATIC / "swagger-ui-LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "SmartBear" in (STATIC / "swagger-ui-NOTICE").read_text()
    assert "DOMPurify" in (STATIC / "swagger-ui-bundle.js.LICENSE.txt").read_text()
