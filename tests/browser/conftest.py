"""Headless Chromium against Slipway's real web process (gunicorn with uvicorn workers) on loopback.

``web_server`` serves the test database (tests take ``transactional_db`` so what they
write is committed and visible to the server). It has no worker, controller or cluster,
and the tasks it enqueues go to a queue of their own that nothing consumes, so the states
a test sets stay as it set them. The whole-stack tests (test_whole_stack.py, tests/support/live.py)
come after these in the run: once the stack's controller is up it judges every app in the
database, these tests' apps included.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live import LiveWeb, start_live_web

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PASSWORD = "correct horse battery staple"  # tests.factories.UserFactory's
QUEUE = f"slipway-browser-{os.getpid()}"


@pytest.fixture(scope="session")
def web_server(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveWeb]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium chromium-driver")
    env = {"SLIPWAY_CELERY_QUEUE": QUEUE, "SLIPWAY_KUBE_SIMULATED": "true"}
    with start_live_web(django_db_blocker, tmp_path_factory.mktemp("web"), env=env) as web:
        yield web


@pytest.fixture
def browser(monkeypatch):
    """Chromium for one test.

    Playwright's sync API keeps an event loop marked running on this thread, so Django
    would refuse this test's own database calls; they are plain sync calls between
    browser steps, which is safe. The permission lasts for this test only.
    """
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def live(web_server, transactional_db):
    """The web server's address, for a test whose writes are committed."""
    return web_server.url


@pytest.fixture
def open_page(browser, request):
    """Return a function that opens a new page (JavaScript on unless told otherwise), closed after the test."""
    contexts = []

    def make(*, javascript: bool = True, viewport: dict | None = None):
        context = browser.new_context(java_script_enabled=javascript, viewport=viewport or {"width": 1280, "height": 900})
        context.set_default_timeout(15_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


def sign_in(page, base: str, username: str) -> None:
    """Sign in through the login form, as a person would."""
    page.goto(base + "/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/")
