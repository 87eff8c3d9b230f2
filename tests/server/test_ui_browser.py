"""The dashboard in a real headless Chromium (Debian's /usr/bin/chromium and
chromedriver; nothing is downloaded): htmx loads the fragments, the buttons
act, and each effect shows on the page and in the store.

Also a script for the docs' screenshot, on a SQLite store with some traffic:
``.venv/bin/python -m tests.server.test_ui_browser docs/img/dashboard.png``."""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException,
    NoSuchElementException,
    StaleElementReferenceException,
)
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.selenium_manager import SeleniumManager
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

import chronoq
from chronoq.server import Action, Auth, ServerSettings, Token, hash_token

from .live import LiveServer, start_server

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 5.0  # the longest any one step may take; most take a few ms


def _no_download(*args: object, **kwargs: object) -> Any:
    raise AssertionError("Selenium Manager was asked for a browser or a driver")


def open_browser(width: int = 1400, height: int = 1000, *more: str) -> WebDriver:
    options = Options()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # the tests run as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        f"--window-size={width},{height}",
        *more,
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def _browser(*more: str) -> Iterator[WebDriver]:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(path)]
    if missing:
        reason = f"{' and '.join(missing)} missing: apt-get install chromium chromium-driver"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "true")
        patch.setattr(SeleniumManager, "binary_paths", _no_download)
        driver = open_browser(1400, 1000, *more)
        try:
            yield driver
        finally:
            driver.quit()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """One browser for the module's tests."""
    yield from _browser()


REBOUND = "127.evil.example"  # a name whose DNS an attacker points at 127.0.0.1


@pytest.fixture
def rebound_browser() -> Iterator[WebDriver]:
    """A browser in which ``REBOUND`` resolves to 127.0.0.1, as DNS rebinding
    makes it do: the page an attacker served from that name now talks to
    this machine's loopback, as its own origin."""
    yield from _browser(f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1")


def until(driver: WebDriver, condition: Callable[[WebDriver], Any], what: str) -> Any:
    """Wait for ``condition`` to be truthy; the fragments that poll replace
    their elements, so a stale or missing element means "not yet"."""
    waiting = WebDriverWait(
        driver,
        WAIT_S,
        poll_frequency=0.05,
        ignored_exceptions=(StaleElementReferenceException, NoSuchElementException),
    )
    return waiting.until(condition, f"waited {WAIT_S}s for {what}")


def css(driver: WebDriver, selector: str) -> Any:
    return driver.find_element(By.CSS_SELECTOR, selector)


def click(driver: WebDriver, selector: str) -> None:
    until(driver, lambda d: css(d, selector).click() or True, f"a click on {selector}")


def text_of(driver: WebDriver, selector: str, wanted: str) -> None:
    until(driver, lambda d: wanted in css(d, selector).text, f"{wanted!r} in {selector}")


def gone(driver: WebDriver, selector: str) -> None:
    until(driver, lambda d: not d.find_elements(By.CSS_SELECTOR, selector), f"{selector} gone")


def state(queue: chronoq.Queue, topic: str, job_id: str) -> str | None:
    info = queue.get(topic, job_id)
    return None if info is None else str(info.state)


def test_act_from_the_page(browser: WebDriver, server: LiveServer, queue: chronoq.Queue) -> None:
    queue.put("orders", {"n": 1}, id="later-1", delay=3600)
    queue.put("orders", {"n": 2}, id="broken-1", priority=1000)
    [job] = queue.reserve("orders")
    queue.bury(job, error="bank said no")
    queue.put("mail", {"to": "x"}, id="m1", delay=60)
    queue.put("orders", {"html": "<script>alert(1)</script>"}, id="xss", delay=3600)
    queue.put("orders", {"n": 3}, id="g1", group="tenant-1")  # after the reserve: its own turn

    browser.get(f"{server.url}/ui/")
    text_of(browser, 'tr[data-topic="orders"]', "orders")
    click(browser, 'tr[data-topic="orders"] a')

    # run a delayed job now
    run_now = '#delayed tr[data-id="later-1"] button[hx-post$="/run-now"]'
    click(browser, run_now)
    text_of(browser, "#flash", "later-1 is due now")
    assert state(queue, "orders", "later-1") == "ready"
    gone(browser, '#delayed tr[data-id="later-1"]')  # the list reloaded itself

    # requeue a dead job
    click(browser, '#dead tr[data-id="broken-1"] button[hx-post$="/requeue"]')
    text_of(browser, "#flash", "Requeued broken-1")
    assert state(queue, "orders", "broken-1") == "ready"
    text_of(browser, "#dead", "No dead letters.")

    # pause a topic from the topics table
    click(browser, 'tr[data-topic="mail"] button[hx-post$="/pause"]')
    text_of(browser, "#flash", "Paused mail")
    assert queue.stats("mail")["paused"] is True
    text_of(browser, 'tr[data-topic="mail"]', "paused")
    text_of(browser, 'tr[data-topic="mail"] button', "Resume")

    # pause and resume a group from the topic's groups panel
    tenant = '#flow tr[data-group="tenant-1"]'
    click(browser, f'{tenant} button[hx-post$="/pause"]')
    text_of(browser, "#flash", "Paused group tenant-1 of orders")
    groups = {g["group"]: g for g in queue.stats("orders", groups=True)["groups"]}
    assert groups["tenant-1"]["paused"] is True
    text_of(browser, tenant, "paused")
    click(browser, f'{tenant} button[hx-post$="/resume"]')
    text_of(browser, "#flash", "Resumed group tenant-1 of orders")
    text_of(browser, tenant, "active")

    # look up a job by topic and id
    css(browser, '#lookup input[name="topic"]').send_keys("orders")
    css(browser, '#lookup input[name="id"]').send_keys("xss")
    click(browser, '#lookup button[type="submit"]')
    text_of(browser, "#job-view", "delayed")
    text_of(browser, "#job-view pre.payload", "<script>alert(1)</script>")  # shown as text
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - reading it is the check
    # an action from the job view refreshes it
    click(browser, '#job-view button[hx-post$="/run-now"]')
    text_of(browser, "#job-view", "ready")
    assert state(queue, "orders", "xss") == "ready"


def test_hostile_values_stay_text_in_the_page(
    browser: WebDriver, server: LiveServer, queue: chronoq.Queue
) -> None:
    """Ids, payloads and errors holding tags, an attribute break-out and
    template syntax show as text: the DOM gains no element or handler."""
    job_id = "\"'><img/src=x/onerror=alert(1)>{{7*7}}"
    queue.put("orders", {"note": "<script>alert(2)</script>{{7*7}}"}, id=job_id, delay=3600)
    queue.put("orders", 1, id="<script>alert(3)</script>", priority=1000)
    [job] = queue.reserve("orders")
    queue.bury(job, error="\"'><img src=x onerror=alert(4)>")
    browser.get(f"{server.url}/ui/?topic=orders")
    text_of(browser, "#delayed", job_id)
    text_of(browser, "#dead", "<script>alert(3)</script>")
    text_of(browser, "#dead", "\"'><img src=x onerror=alert(4)>")
    css(browser, '#lookup input[name="id"]').send_keys(job_id)  # its topic is the page's
    click(browser, '#lookup button[type="submit"]')
    text_of(browser, "#job-view pre.payload", "<script>alert(2)</script>{{7*7}}")
    text_of(browser, "#job-view h3", job_id)
    made = browser.execute_script(
        "return [document.querySelectorAll('img').length,"
        " [...document.scripts].filter((s) => !s.src).length,"
        " [...document.querySelectorAll('*')].filter("
        "   (e) => [...e.attributes].some((a) => a.name.startsWith('on'))).length]"
    )
    assert made == [0, 0, 0]
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - reading it is the check


READER = "reader-token"


def test_a_token_pasted_into_the_page(
    browser: WebDriver, serve: Callable[..., LiveServer], queue: chronoq.Queue
) -> None:
    tokens = [Token("reader", hash_token(READER), ("*",), frozenset({Action.READ}))]
    server = serve(ServerSettings(auth=Auth(tokens)))
    queue.put("orders", 1, id="j1", delay=60)
    browser.get(f"{server.url}/ui/")
    browser.execute_script("sessionStorage.clear()")
    browser.refresh()
    text_of(browser, "#problem", "paste a token")
    css(browser, "#token").send_keys(READER)
    click(browser, '#token-form button[type="submit"]')
    text_of(browser, 'tr[data-topic="orders"]', "orders")
    until(browser, lambda d: not css(d, "#problem").is_displayed(), "the problem banner to go")
    assert not browser.find_elements(By.CSS_SELECTOR, "button[hx-post]")  # read: no actions
    browser.refresh()  # the token stays for the tab
    text_of(browser, 'tr[data-topic="orders"]', "orders")
    click(browser, "#forget-token")
    text_of(browser, "#problem", "paste a token")


# -- the screenshot of docs/dashboard.md --------------------------------------------------------


def _traffic(queue: chronoq.Queue, seconds: float) -> None:
    """Jobs put and worked at changing rates, some reserves late (a lag spread)."""
    end = time.monotonic() + seconds
    rng = random.Random(7)
    while time.monotonic() < end:
        phase = (end - time.monotonic()) / seconds
        for topic, rate in (("orders.eu", 12 * phase + 2), ("reports", 6 * (1 - phase) + 1)):
            for _ in range(rng.randint(0, int(rate))):
                queue.put(topic, {"n": rng.randint(1, 10_000)}, delay=rng.choice([0, 0, 0.05]))
        time.sleep(rng.choice([0.002, 0.01, 0.05, 0.2]))
        for topic in ("orders.eu", "reports"):
            jobs = queue.reserve(topic, count=rng.choice([5, 50]))
            queue.ack_many(jobs)


def _scene(queue: chronoq.Queue, seconds: float) -> None:
    _traffic(queue, seconds)
    for n in range(40):
        queue.put("orders.eu", {"order": 1000 + n}, id=f"order-{1000 + n}", delay=600 + 45 * n)
    for n, error in enumerate(["card declined", "timeout talking to bank", "ValueError: bad sku"]):
        queue.put("orders.eu", {"order": 900 + n}, id=f"order-{900 + n}", priority=1000)
        [job] = queue.reserve("orders.eu")
        queue.bury(job, error=error)
    queue.put("mail", {"to": "ana@example.com"}, id="welcome-ana", delay=30)
    queue.put("mail", {"to": "bo@example.com"}, id="welcome-bo")
    queue.pause("mail")
    queue.put("reports", {"day": "2026-05-01"}, id="daily", delay=3 * 3600)


def screenshot(path: Path, seconds: float = 100) -> None:
    """``seconds`` of traffic first: the sparklines span three minutes."""
    path = path.resolve()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)  # the page shows the store URL: a short one
        store = "sqlite:///chronoq.db"
        queue = chronoq.connect(store)
        server = start_server(store)
        os.environ["SE_OFFLINE"] = "true"
        driver = open_browser(1400, 1000)
        try:
            # the open page polls, so the server tails the log as the traffic runs
            driver.get(f"{server.url}/ui/?topic=orders.eu")
            _scene(queue, seconds)
            text_of(driver, 'tr[data-topic="mail"]', "paused")
            driver.get(f"{server.url}/ui/?topic=orders.eu")
            text_of(driver, "#dead", "timeout talking to bank")
            text_of(driver, "#delayed", "order-1000")
            css(driver, '#lookup input[name="id"]').send_keys("order-901")
            click(driver, '#lookup button[type="submit"]')
            text_of(driver, "#job-view", "timeout talking to bank")
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(1400, min(int(height) + 40, 1500))
            text_of(driver, 'tr[data-topic="orders.eu"]', "orders.eu")
            driver.save_screenshot(str(path))
        finally:
            driver.quit()
            server.stop()
            queue.close()


def test_a_rebound_name_reads_and_changes_nothing(
    rebound_browser: WebDriver, server: LiveServer, queue: chronoq.Queue
) -> None:
    """Issue 24: a page at http://127.evil.example:PORT/ read every topic and
    a payload, and paused a topic, of a server without tokens."""
    queue.put("orders", {"card": "4111"}, id="secret", delay=3600)
    port = server.url.rsplit(":", 1)[1]
    rebound_browser.get(f"http://{REBOUND}:{port}/ui/")
    assert "foreign_host" in rebound_browser.page_source
    assert "4111" not in rebound_browser.page_source
    script = """
        const done = arguments[arguments.length - 1];
        const read = (path, init) => fetch(path, init).then(
            async (r) => [r.status, await r.text()], (e) => [0, String(e)]);
        Promise.all([
            read("/v1/topics"),
            read("/v1/topics/orders/jobs/secret"),
            read("/v1/topics/orders/pause", {method: "POST"}),
            read("/ui/topics/orders/pause", {method: "POST", headers: {"HX-Request": "true"}}),
        ]).then(done);
    """
    answers = rebound_browser.execute_async_script(script)
    for status, body in answers:
        assert status == 403 and "foreign_host" in body, (status, body)
    assert queue.stats("orders")["paused"] is False


if __name__ == "__main__":
    screenshot(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img/dashboard.png"), 100)
