"""The API reference at /docs in a real headless Chromium (Debian's
/usr/bin/chromium and chromedriver; nothing is downloaded): Swagger UI renders
every operation of /openapi.json under the page's CSP, a "try it" put from
the page answers 201 and the job is in the store, with tokens through the
Authorize dialog too, and behind a proxy's prefix; the browser asks no other
site for anything and reports no error (a CSP violation is one)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.common.selenium_manager import SeleniumManager
from selenium.webdriver.remote.webdriver import WebDriver

import chronoq
from chronoq.server import Action, Auth, ServerSettings, Token, hash_token

from .live import LiveServer, ServeProcess, free_port
from .test_ui_browser import CHROMEDRIVER, CHROMIUM, click, css, text_of, until

PUT = "#operations-produce-post__v1_topics_topic_jobs"  # Swagger UI's id: tag and operationId
PUTTER = "putter-token"


def _no_download(*args: object, **kwargs: object) -> Any:
    raise AssertionError("Selenium Manager was asked for a browser or a driver")


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """One browser for the module, which keeps its console and its requests
    for the tests to read."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(path)]
    if missing:
        reason = f"{' and '.join(missing)} missing: apt-get install chromium chromium-driver"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-extensions", "--window-size=1400,1400"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "true")
        patch.setattr(SeleniumManager, "binary_paths", _no_download)
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
        try:
            yield driver
        finally:
            driver.quit()


def fresh(browser: WebDriver) -> None:
    """Forget the logs of the tests before."""
    browser.get_log("browser")
    browser.get_log("performance")


def requested(browser: WebDriver) -> list[str]:
    """The URLs the browser asked for since the logs were last read."""
    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def only_here(browser: WebDriver, base: str, *expected: str) -> None:
    """Every request went to this server (or was a data: URL), and the console
    holds no error but the ``expected`` ones: a request that the CSP refused
    would be one. The browser asks the server's root for /favicon.ico, which
    answers 404: the pages name no icon."""
    origin = "/".join(base.split("/")[:3])
    elsewhere = [u for u in requested(browser) if not u.startswith((f"{base}/", "data:"))]
    assert set(elsewhere) <= {f"{origin}/favicon.ico"}, elsewhere
    expected += (f"{origin}/favicon.ico - Failed to load resource: the server responded with a "
                 "status of 404",)  # fmt: skip
    errors = [
        entry
        for entry in browser.get_log("browser")
        if entry["level"] == "SEVERE" and not any(e in entry["message"] for e in expected)
    ]
    assert not errors, errors


def operations(document: dict[str, Any]) -> int:
    return sum(len(methods) for methods in document["paths"].values())


def rendered(browser: WebDriver, document: dict[str, Any]) -> None:
    """Every operation of the document is on the page, the put with its summary."""
    text_of(browser, f"{PUT} .opblock-summary", "Put one job")
    count = operations(document)
    until(
        browser,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, ".opblock")) == count,
        f"{count} operations",
    )


def try_put(browser: WebDriver, topic: str, body: dict[str, Any]) -> None:
    """Open the put, switch it to "try it out", fill the topic and body, execute."""
    if not css(browser, PUT).get_attribute("class").count("is-open"):
        click(browser, f"{PUT} .opblock-summary-control")
    switch = until(browser, lambda d: css(d, f"{PUT} .try-out__btn"), "the try-out switch")
    if switch.text == "Try it out":  # else it reads "Cancel": already trying out
        switch.click()
    field = until(browser, lambda d: css(d, f'{PUT} input[placeholder="topic"]'), "the topic")
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(topic)
    text = until(browser, lambda d: css(d, f"{PUT} textarea.body-param__text"), "the body")
    text.send_keys(Keys.CONTROL, "a")
    text.send_keys(Keys.DELETE)
    text.send_keys(json.dumps(body))
    click(browser, f"{PUT} button.execute")


def answered(browser: WebDriver, status: int, *shown: str) -> None:
    """The live response of the put shows ``status`` and each of ``shown``."""
    live = f"{PUT} .live-responses-table .response"
    text_of(browser, f"{live} .response-col_status", str(status))
    for wanted in shown:
        text_of(browser, f"{live} .response-col_description", wanted)


def test_the_page_renders_and_a_put_runs_from_it(
    browser: WebDriver, server: LiveServer, queue: chronoq.Queue
) -> None:
    document = httpx.get(f"{server.url}/openapi.json").json()
    fresh(browser)
    browser.get(f"{server.url}/ui/")
    click(browser, "header a.docs-link")  # the dashboard's link to the reference
    until(browser, lambda d: d.current_url == f"{server.url}/docs", "the page /docs")
    rendered(browser, document)

    try_put(browser, "from-docs", {"id": "tried", "payload": {"n": 1}, "delay": 3600})
    answered(browser, 201, '"id": "tried"', '"created": true')
    shown_url = f"{PUT} .request-url pre"
    text_of(browser, shown_url, f"{server.url}/v1/topics/from-docs/jobs")
    info = queue.get("from-docs", "tried")
    assert info is not None and info.payload == {"n": 1} and str(info.state) == "delayed"
    only_here(browser, server.url)


def test_with_tokens_try_it_sends_the_authorized_token(
    browser: WebDriver, serve: Callable[..., LiveServer], queue: chronoq.Queue
) -> None:
    tokens = [Token("putter", hash_token(PUTTER), ("*",), frozenset({Action.PUT}))]
    server = serve(ServerSettings(auth=Auth(tokens)))
    fresh(browser)
    browser.get(f"{server.url}/docs")
    rendered(browser, httpx.get(f"{server.url}/openapi.json").json())

    try_put(browser, "secured", {"id": "no-token", "payload": 1})
    answered(browser, 401, "unauthorized")
    assert queue.get("secured", "no-token") is None

    click(browser, "button.authorize")
    value = until(browser, lambda d: css(d, ".modal-ux input[type=text]"), "the token field")
    value.send_keys(PUTTER)
    click(browser, '.modal-ux .auth-btn-wrapper button[type="submit"]')
    click(browser, ".modal-ux button.btn-done")
    try_put(browser, "secured", {"id": "with-token", "payload": 2})
    answered(browser, 201, '"id": "with-token"')
    info = queue.get("secured", "with-token")
    assert info is not None and info.payload == 2
    # the token stays in the tab's memory, not in its storage
    stored = browser.execute_script(
        "return JSON.stringify(localStorage) + JSON.stringify(sessionStorage)"
    )
    assert PUTTER not in stored
    only_here(browser, server.url, "/v1/topics/secured/jobs - Failed to load resource: the "
              "server responded with a status of 401")  # fmt: skip


class PrefixProxy:
    """A reverse proxy on a free loopback port that serves ``target`` under
    ``prefix`` and strips it, as one in front of ``chronoq serve --root-path``
    does; the Host header goes on as the browser sent it."""

    def __init__(self, target: str, prefix: str) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                proxy.forward(self)

            do_POST = do_HEAD = do_GET

            def log_message(self, *args: Any) -> None:
                pass

        self.target, self.prefix = target, prefix
        self.client = httpx.Client(timeout=30)
        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}{prefix}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def forward(self, request: BaseHTTPRequestHandler) -> None:
        if not request.path.startswith(f"{self.prefix}/"):
            request.send_error(404, f"only {self.prefix}/ is served here")
            return
        size = int(request.headers.get("content-length") or 0)
        sent = httpx.Request(
            request.command,
            self.target + request.path.removeprefix(self.prefix),
            headers=[(k, v) for k, v in request.headers.items() if k.lower() != "connection"],
            content=request.rfile.read(size),
        )
        answer = self.client.send(sent, stream=True)
        body = b"".join(answer.iter_raw())  # as the server sent it, compressed or not
        request.send_response(answer.status_code)
        for name, value in answer.headers.multi_items():
            if name.lower() not in ("connection", "transfer-encoding", "date", "server"):
                request.send_header(name, value)
        request.end_headers()
        request.wfile.write(body)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.client.close()


def test_behind_a_proxy_prefix_the_calls_keep_it(browser: WebDriver, tmp_path: Path) -> None:
    """``chronoq serve --root-path /queue`` behind a proxy at /queue: the
    page's files, its document and its "try it" calls all go under /queue."""
    server = ServeProcess(tmp_path, "--root-path", "/queue")
    proxy = PrefixProxy(server.url, "/queue")
    try:
        fresh(browser)
        browser.get(f"{proxy.url}/docs")
        rendered(browser, httpx.get(f"{proxy.url}/openapi.json").json())
        try_put(browser, "prefixed", {"id": "p1", "payload": "x"})
        answered(browser, 201, '"id": "p1"')
        text_of(browser, f"{PUT} .request-url pre", f"{proxy.url}/v1/topics/prefixed/jobs")
        with chronoq.connect(f"sqlite:///{tmp_path / 'serve.db'}") as queue:
            assert queue.get("prefixed", "p1") is not None
        only_here(browser, proxy.url)
    finally:
        proxy.stop()
        assert server.stop() == 0
