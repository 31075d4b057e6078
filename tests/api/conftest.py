"""API clients for the cast, and a live web server (gunicorn with uvicorn workers) for streams over real HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from rest_framework.test import APIClient

from apps.accounts.services import api_token_create
from tests.support.live import LiveWeb, start_live_web


@pytest.fixture
def token_for(db) -> Callable[..., str]:
    """Return a new raw API token for a user."""

    def make(user, name: str = "ci") -> str:
        return api_token_create(user=user, name=name)[1]

    return make


@pytest.fixture
def api(token_for) -> Callable[..., APIClient]:
    """Return an API client that presents ``user``'s token (no credentials for None)."""

    def make(user=None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_for(user)}")
        return client

    return make


@pytest.fixture(scope="session")
def _live_web(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveWeb]:
    with start_live_web(django_db_blocker, tmp_path_factory.mktemp("web")) as web:
        yield web


@pytest.fixture
def live_web(_live_web: LiveWeb, transactional_db) -> LiveWeb:
    """The web process on loopback, reading the database this test writes (committed, hence transactional)."""
    _live_web.ensure_running()
    return _live_web
