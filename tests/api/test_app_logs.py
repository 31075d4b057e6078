"""Live app logs: the running pods' output over SSE, only while the app is live."""

from __future__ import annotations

import pytest

from apps.api import app_logs
from apps.deployments import services
from apps.deployments.lifecycle import Status, transition
from tests.api.sse import parse_frames, read_stream

pytestmark = pytest.mark.django_db
COMMIT = services.Commit("3f2a9c1d0e5b7a8c9d0e1f2a3b4c5d6e7f8a9b0c", "Fix checkout", "Alice <alice@example.com>")


@pytest.fixture
def live_shop(shop, alice):
    deployment = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    transition(deployment, to=Status.DEPLOYING, image="127.0.0.1:5000/shop@sha256:" + "a" * 64)
    transition(deployment, to=Status.LIVE)
    return shop


@pytest.fixture
def pod_output(monkeypatch):
    """The cluster's side: what the app's pods print, and what the stream asked for."""
    asked = []

    def source(namespace, label_selector, tail_lines):
        asked.append((namespace, label_selector, tail_lines))
        yield ("shop-7d9f-x2k4", "app", "Listening on :8000")
        yield ("shop-7d9f-x2k4", "app", "GET / 200")

    monkeypatch.setattr(app_logs, "source", source)
    return asked


def test_the_pods_output_streams_as_log_events(api, bob, live_shop, pod_output):
    response = api(bob).get("/api/v1/apps/shop/logs?tail=20")
    assert response["Content-Type"] == "text/event-stream; charset=utf-8"
    frames = [f for f in parse_frames(read_stream(response)) if f.data]
    assert [(f.event, f.json()) for f in frames] == [
        ("log", {"pod": "shop-7d9f-x2k4", "container": "app", "line": "Listening on :8000"}),
        ("log", {"pod": "shop-7d9f-x2k4", "container": "app", "line": "GET / 200"}),
        ("end", {"message": "The pods' output ended."}),
    ]
    ((namespace, selector, tail),) = pod_output
    assert (namespace, tail) == ("slipway-shop", 20) and "shop" in selector


def test_a_source_that_fails_ends_the_stream_saying_why(api, alice, live_shop, monkeypatch):
    def broken(namespace, label_selector, tail_lines):
        raise ConnectionError("the API server went away")
        yield  # a generator, like the real one

    monkeypatch.setattr(app_logs, "source", broken)
    frames = [f for f in parse_frames(read_stream(api(alice).get("/api/v1/apps/shop/logs"))) if f.data]
    assert [(f.event, f.json()) for f in frames] == [("end", {"message": "The log stream stopped: the API server went away"})]


def test_an_app_that_is_not_live_has_no_app_logs(api, alice, shop, pod_output):
    response = api(alice).get("/api/v1/apps/shop/logs")
    assert response.status_code == 409
    assert response.json()["error"] == {
        "code": "not_live",
        "message": "App logs are only available while the app is live; its current deployment is not deployed yet.",
        "field": None,
    }
    assert pod_output == []


@pytest.mark.parametrize("tail", ["-1", "lots", "10001"])
def test_a_bad_tail_is_refused(api, alice, live_shop, pod_output, tail):
    response = api(alice).get(f"/api/v1/apps/shop/logs?tail={tail}")
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "invalid",
        "message": "tail takes a whole number from 0 to 10000.",
        "field": "tail",
    }


def test_outsiders_get_no_app_logs(api, charlie, live_shop, pod_output):
    assert api(charlie).get("/api/v1/apps/shop/logs").status_code == 404
    assert pod_output == []
