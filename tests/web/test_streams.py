"""Live updates: the same partials the pages render, sent over SSE when something changes, resumable by id."""

from __future__ import annotations

import asyncio
import re

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone

from apps.api import app_logs
from apps.deployments.health import Health, HealthState
from apps.deployments.health_store import record
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import Event
from apps.web import streams
from tests.factories import AppFactory
from tests.web.conftest import IMAGE, deploy, log

pytestmark = pytest.mark.django_db
DEADLINE = 15.0


def parse(text: str) -> list[dict[str, str]]:
    """Split an SSE text into frames: {"id", "event", "data"} (comments and retry-only frames dropped)."""
    frames = []
    for block in text.split("\n\n"):
        frame: dict[str, str] = {}
        data = []
        for line in block.split("\n"):
            if line.startswith("data: "):
                data.append(line[6:])
            elif line.startswith("id: "):
                frame["id"] = line[4:]
            elif line.startswith("event: "):
                frame["event"] = line[7:]
        if data:
            frame["data"] = "\n".join(data)
            frames.append(frame)
    return frames


def newest_event(app) -> int:
    return Event.objects.filter(app=app).order_by("-id").values_list("id", flat=True).first() or 0


def stream(client, url: str, *, until, during=None, headers=None) -> list[dict[str, str]]:
    """Open ``url`` as a browser would, run ``during`` once connected, and read frames until ``until(frames)``."""

    async def run() -> list[dict[str, str]]:
        async_client = AsyncClient()
        async_client.cookies = client.cookies
        response = await async_client.get(url, headers=headers or {})
        assert response.status_code == 200, response
        assert response["Content-Type"] == "text/event-stream; charset=utf-8"
        chunks = response.streaming_content
        text, frames = "", []
        try:
            async with asyncio.timeout(DEADLINE):
                first = True
                async for chunk in chunks:
                    text += chunk.decode() if isinstance(chunk, bytes) else chunk
                    frames = parse(text)
                    if first and during is not None:
                        first = False
                        await sync_to_async(during)()
                    if until(frames):
                        return frames
        finally:
            await chunks.aclose()
        return frames

    return async_to_sync(run)()


def events_named(frames, name):
    return [f for f in frames if f.get("event") == name]


# -- the app page ----------------------------------------------------------------------------------


def test_nothing_is_sent_when_nothing_changed(shop, alice):
    deploy(shop, alice, to="building")
    assert streams.app_page_frames(shop.pk, newest_event(shop)) == []


def test_a_change_sends_the_pages_partials_with_the_newest_event_id(shop, alice):
    d = deploy(shop, alice, to="building")
    before = newest_event(shop)
    transition(d, to=Status.DEPLOYING, image=IMAGE)
    [(last, text)] = streams.app_page_frames(shop.pk, before)
    frames = parse(text)
    assert last == newest_event(shop) and {f["id"] for f in frames} == {str(last)}
    assert [f["event"] for f in frames] == ["status", "health", "actions", "history"]
    assert "deploying" in frames[0]["data"] and "Image pushed, controller applying K8s manifests" in frames[0]["data"]
    assert "Stop" in frames[2]["data"]


def test_the_app_stream_sends_a_status_change_without_a_reload(as_alice, shop, alice):
    d = deploy(shop, alice, to="building")
    url = reverse("app-events", args=["shop"]) + f"?after={newest_event(shop)}"

    def change():
        transition(d, to=Status.DEPLOYING, image=IMAGE)

    frames = stream(as_alice, url, during=change, until=lambda fs: events_named(fs, "status"))
    assert "deploying" in events_named(frames, "status")[0]["data"]


def test_the_app_stream_sends_a_health_change(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    url = reverse("app-events", args=["shop"]) + f"?after={newest_event(shop)}"

    def crash():
        record(app_id=shop.pk, health=Health(HealthState.UNHEALTHY, "CrashLoopBackOff"), now=timezone.now())

    frames = stream(as_alice, url, during=crash, until=lambda fs: events_named(fs, "health"))
    health = events_named(frames, "health")[0]["data"]
    assert "Unhealthy" in health and "CrashLoopBackOff" in health and "keeps crashing right after it starts" in health


def test_a_reconnecting_browser_gets_what_it_missed_from_last_event_id(as_alice, shop, alice):
    d = deploy(shop, alice, to="building")
    seen = newest_event(shop)
    transition(d, to=Status.FAILED, error="build failed at step build: out of disk")
    url = reverse("app-events", args=["shop"]) + "?after=0"
    frames = stream(as_alice, url, headers={"Last-Event-ID": str(seen)}, until=lambda fs: events_named(fs, "status"))
    status = events_named(frames, "status")[0]
    assert status["id"] == str(newest_event(shop))
    assert "failed" in status["data"] and "out of disk" in status["data"]


@pytest.mark.parametrize("name", ["app-events", "deployment-log-events"])
def test_a_bad_last_event_id_is_answered_with_400(as_alice, shop, alice, name):
    deploy(shop, alice, to="building")
    args = ["shop"] if name == "app-events" else ["shop", 1]
    response = as_alice.get(reverse(name, args=args), headers={"Last-Event-ID": "yesterday"})
    assert response.status_code == 400
    assert "must be a non-negative integer" in response.content.decode()
    assert as_alice.get(reverse(name, args=args) + "?after=-3").status_code == 400


# -- the apps list ---------------------------------------------------------------------------------


def test_the_list_stream_sends_rows_of_visible_apps_only(shop, alice, charlie):
    site = AppFactory(name="globex-site", team=charlie.teams.get())
    deploy(shop, alice, to="building")
    deploy(site, charlie, to="building")
    [(last, text)] = streams.app_list_frames(alice, 0)
    frames = parse(text)
    assert [f["event"] for f in frames] == [f"app-{shop.pk}"]
    assert f'id="app-{shop.pk}"' in frames[0]["data"] and "building" in frames[0]["data"]
    assert last == newest_event(shop)


def test_the_list_stream_sends_a_row_when_its_status_changes(as_alice, shop, alice):
    d = deploy(shop, alice, to="building")
    url = reverse("app-list-events") + f"?after={newest_event(shop)}"

    def fail():
        transition(d, to=Status.FAILED, error="boom")

    frames = stream(as_alice, url, during=fail, until=lambda fs: events_named(fs, f"app-{shop.pk}"))
    assert "failed" in events_named(frames, f"app-{shop.pk}")[0]["data"]


# -- a deployment's log ------------------------------------------------------------------------------


def test_new_log_lines_stream_with_step_markers_and_the_stream_ends_when_the_deployment_settles(as_alice, shop, alice):
    d = deploy(shop, alice, to="building")
    log(d, "clone", "Cloning into /workspace")
    last = d.log_lines.order_by("-seq").first().seq
    url = reverse("deployment-log-events", args=["shop", 1]) + f"?after={last}"

    def build_then_fail():
        log(d, "clone", "HEAD is now at 3f2a9c1")
        log(d, "build", "#5 RUN pip install")
        transition(d, to=Status.FAILED, error="build failed at step build: pip exited 1")

    frames = stream(as_alice, url, during=build_then_fail, until=lambda fs: events_named(fs, "end"))
    html = "".join(f["data"] for f in events_named(frames, "log"))
    assert "HEAD is now at 3f2a9c1" in html and "#5 RUN pip install" in html
    assert 'data-step="clone"' not in html  # the clone step carries on from the page
    assert 'data-step="build"' in html
    assert events_named(frames, "log")[-1]["id"] == str(d.log_lines.order_by("-seq").first().seq)
    header = events_named(frames, "header")[0]["data"]
    assert "failed" in header and "build failed at step build: pip exited 1" in header
    assert events_named(frames, "end")[0]["data"] == "failed"


def test_a_settled_deployments_stream_sends_the_rest_and_ends(as_alice, shop, alice):
    d = deploy(shop, alice, to="live")
    log(d, "rollout", "Rollout complete: 1 of 1 pod(s) ready.")
    frames = stream(as_alice, reverse("deployment-log-events", args=["shop", 1]), until=lambda fs: events_named(fs, "end"))
    assert "Rollout complete" in "".join(f["data"] for f in events_named(frames, "log"))
    assert events_named(frames, "end")[0]["data"] == "live"


def test_the_log_stream_of_a_missing_deployment_is_404(as_alice, shop):
    assert as_alice.get(reverse("deployment-log-events", args=["shop", 7])).status_code == 404


# -- the app's own output -------------------------------------------------------------------------------


def collect(app, source, *, live=lambda app_id: True, until) -> list[dict[str, str]]:
    async def run():
        chunks = streams.app_log_chunks(app, source=source, live=live)
        text = ""
        try:
            async with asyncio.timeout(DEADLINE):
                async for chunk in chunks:
                    text += chunk
                    if until(parse(text)):
                        break
        finally:
            await chunks.aclose()
        return parse(text)

    return async_to_sync(run)()


def test_app_output_shows_which_pod_each_line_came_from_when_there_are_several(shop):
    calls = []

    def source(namespace, selector, tail_lines):
        calls.append((namespace, selector, tail_lines))
        yield ("shop-7d9c-a", "app", "listening on :8000")
        yield ("shop-7d9c-b", "app", "GET / 200")

    frames = collect(shop, source, until=lambda fs: len(events_named(fs, "line")) >= 2)
    lines = [f["data"] for f in events_named(frames, "line")]
    assert "listening on :8000" in lines[0] and "shop-7d9c-a" not in lines[0]  # one pod so far, one replica
    assert '<span class="pod">shop-7d9c-b</span>' in lines[1]
    assert calls[0] == ("slipway-shop", app_logs.pod_selector(shop), streams.APP_LOG_TAIL)
    assert "slipway.dev/app=shop" in calls[0][1] and "slipway.dev/component=app" in calls[0][1]


def test_app_output_stops_with_a_note_when_the_app_is_not_live(shop):
    def source(namespace, selector, tail_lines):
        raise AssertionError("no pods are read for an app that is not live")

    frames = collect(shop, source, live=lambda app_id: False, until=lambda fs: events_named(fs, "end"))
    assert "The app is not live" in events_named(frames, "end")[0]["data"]


def test_app_output_follows_the_new_pods_after_a_redeploy(shop):
    generations = iter([[("shop-old", "app", "old pod says bye")], [("shop-new", "app", "new pod says hi")]])
    tails = []

    def source(namespace, selector, tail_lines):
        tails.append(tail_lines)
        yield from next(generations, [])

    frames = collect(shop, source, until=lambda fs: len(events_named(fs, "line")) >= 2)
    texts = [re.sub(r"<[^>]+>", "", f["data"]) for f in events_named(frames, "line")]
    assert "old pod says bye" in texts[0] and "new pod says hi" in texts[1]
    assert tails[:2] == [streams.APP_LOG_TAIL, 0]  # the second read starts at the present: no line twice


def test_a_cluster_error_is_shown_in_the_panel_and_the_stream_carries_on(shop):
    attempts = iter([RuntimeError("pods/log is forbidden"), None])

    def source(namespace, selector, tail_lines):
        error = next(attempts)
        if error is not None:
            raise error
        yield ("shop-1", "app", "back again")

    frames = collect(shop, source, until=lambda fs: any("back again" in f["data"] for f in fs))
    texts = [f["data"] for f in events_named(frames, "line")]
    assert "Log stream interrupted: pods/log is forbidden. Retrying…" in texts[0]


def test_the_app_logs_view_uses_the_injected_source(as_alice, shop, alice, monkeypatch):
    deploy(shop, alice, to="live")

    def source(namespace, selector, tail_lines):
        yield ("shop-1", "app", "hello from the pod")

    monkeypatch.setattr(app_logs, "source", source)
    frames = stream(as_alice, reverse("app-log-events", args=["shop"]), until=lambda fs: events_named(fs, "line"))
    assert "hello from the pod" in events_named(frames, "line")[0]["data"]


def test_an_installation_that_cannot_follow_pods_says_so_once_and_ends(shop):
    def source(namespace, selector, tail_lines):
        raise app_logs.LogsUnavailable("This installation's cluster module cannot follow pod logs yet.")

    frames = collect(shop, source, until=lambda fs: events_named(fs, "end"))
    assert events_named(frames, "end")[0]["data"] == "This installation's cluster module cannot follow pod logs yet."
