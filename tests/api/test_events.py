"""The event stream: every status and health change, resumable from the last id, nothing twice, resync past retention."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
import requests
from asgiref.sync import async_to_sync, sync_to_async
from django.utils import timezone

from apps.accounts.services import api_token_create
from apps.deployments import health_store, services, streams
from apps.deployments.health import Health, HealthState
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import Event
from apps.deployments.streams import Window, can_resume
from tests.api.sse import Frame, parse_frames

COMMIT = services.Commit("3f2a9c1d0e5b7a8c9d0e1f2a3b4c5d6e7f8a9b0c", "Fix checkout", "Alice <alice@example.com>")


class Prompt:
    """Wake-ups that come at once: the stream reads again without waiting for the bus."""

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return None

    async def wait(self, timeout: float = 0) -> None:
        await asyncio.sleep(0.01)


def deploy_to_live(app, actor) -> None:
    """Make four status events: pending, building, deploying, live."""
    deployment = services.deployment_create(app=app, trigger="push", actor=actor, commit=COMMIT)
    transition(deployment, to=Status.BUILDING)
    transition(deployment, to=Status.DEPLOYING, image="127.0.0.1:5000/shop@sha256:" + "a" * 64)
    transition(deployment, to=Status.LIVE)


def before_first() -> int:
    """Return the id just before this test's first event (ids do not restart between tests on PostgreSQL)."""
    return Event.objects.order_by("id").values_list("id", flat=True).first() - 1


def stream_for(user, *, last_event_id=None, app=None, heartbeat=30.0):
    from apps.deployments.selectors import apps_visible_to

    events = Event.objects.filter(app_id__in=apps_visible_to(user).values("pk"))
    if app is not None:
        events = events.filter(app=app)
    return streams.event_stream(events, last_event_id=last_event_id, heartbeat=heartbeat, subscription=Prompt)


async def read(gen, *, events: int, timeout: float = 5.0) -> list[Frame]:
    """Return frames (with comments as Frame(event="comment")) until ``events`` frames with data have come."""
    frames: list[Frame] = []
    while sum(1 for f in frames if f.data is not None) < events:
        chunk = await asyncio.wait_for(gen.__anext__(), timeout)
        parsed = parse_frames(chunk) or [Frame(id=None, event="comment", data=None, retry=None)]
        frames.extend(parsed)
    return frames


def ids(frames: list[Frame]) -> list[int]:
    return [int(f.id) for f in frames if f.data is not None and f.event != "resync"]


# -- resuming: the pure rule -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("last_id", "window", "stored", "expected"),
    [
        (7, Window(3, 9), True, True),  # the event it saw is still stored
        (2, Window(3, 9), False, True),  # nothing could lie between 2 and the oldest stored, 3
        (1, Window(3, 9), False, False),  # event 2 may have been deleted
        (12, Window(3, 9), False, False),  # never given out by this server
        (0, Window(None, None), False, True),  # nothing ever happened
        (5, Window(None, None), False, False),  # everything it might have missed is gone
    ],
)
def test_a_client_can_resume_only_when_nothing_it_missed_was_deleted(last_id, window, stored, expected):
    assert can_resume(last_id, window, last_id_stored=stored) is expected


# -- the generator ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_new_client_starts_at_the_present_and_is_told_where(alice, shop):
    deploy_to_live(shop, alice)
    newest = Event.objects.latest("id").pk

    async def scenario():
        gen = stream_for(alice)
        first = parse_frames(await gen.__anext__())
        await sync_to_async(services.app_stop)(app=shop, actor=alice)
        frames = await read(gen, events=1)
        await gen.aclose()
        return first, frames

    first, frames = async_to_sync(scenario)()
    assert first == [Frame(id=str(newest), event=None, data=None, retry=streams.RETRY_MS)]
    (stopped,) = [f for f in frames if f.data]
    assert stopped.event == "status" and int(stopped.id) > newest
    assert stopped.json() | {"time": None} == {
        "id": int(stopped.id),
        "kind": "status",
        "app": "shop",
        "deployment": 1,
        "from": "live",
        "to": "stopped",
        "reason": "stopped by alice",
        "actor": "alice",
        "time": None,
        "error": "",
    }


@pytest.mark.django_db
def test_a_client_that_reconnects_gets_every_missed_event_in_order_once(alice, shop):
    deploy_to_live(shop, alice)  # events 1-4 for this app

    start = before_first()

    async def scenario():
        gen = stream_for(alice, last_event_id=start)
        seen = ids(await read(gen, events=2))
        await gen.aclose()  # the connection drops after two events
        await sync_to_async(deploy_to_live)(shop, alice)  # five more while away (the first one is superseded)
        total = await sync_to_async(Event.objects.count)()
        gen = stream_for(alice, last_event_id=seen[-1])
        seen += ids(await read(gen, events=total - len(seen)))
        await gen.aclose()
        return seen

    seen = async_to_sync(scenario)()
    stored = list(Event.objects.filter(kind__in=["status", "health"]).order_by("id").values_list("id", flat=True))
    assert seen == stored  # no gap, no duplicate, in order


@pytest.mark.django_db
def test_a_failed_deployment_event_carries_the_error(alice, shop):
    deployment = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    transition(deployment, to=Status.FAILED, error="build failed: exit 1 in step build")

    start = before_first()

    async def scenario():
        gen = stream_for(alice, last_event_id=start)
        frames = await read(gen, events=2)
        await gen.aclose()
        return frames

    failed = [f for f in async_to_sync(scenario)() if f.data][-1]
    assert failed.json()["to"] == "failed"
    assert failed.json()["error"] == "build failed: exit 1 in step build"


@pytest.mark.django_db
def test_health_changes_are_events_too(alice, shop):
    health_store.record(app_id=shop.pk, health=Health(HealthState.UNHEALTHY, "CrashLoopBackOff"), now=timezone.now())

    start = before_first()

    async def scenario():
        gen = stream_for(alice, last_event_id=start)
        frames = await read(gen, events=1)
        await gen.aclose()
        return frames

    (health,) = [f for f in async_to_sync(scenario)() if f.data]
    assert health.event == "health"
    data = health.json()
    assert (data["health"], data["reason"], data["to"], data["deployment"]) == (
        "unhealthy",
        "CrashLoopBackOff",
        "unhealthy: CrashLoopBackOff",
        None,
    )


@pytest.mark.django_db
def test_action_events_are_not_streamed(alice, shop):
    Event.objects.create(app=shop, kind=Event.Kind.ACTION, to_value="settings changed")
    deploy_to_live(shop, alice)

    start = before_first()

    async def scenario():
        gen = stream_for(alice, last_event_id=start)
        frames = await read(gen, events=4)
        await gen.aclose()
        return frames

    assert [f.event for f in async_to_sync(scenario)() if f.data] == ["status"] * 4


@pytest.mark.django_db
def test_a_client_behind_the_retention_is_told_to_resync(alice, shop):
    deploy_to_live(shop, alice)
    old = timezone.now() - dt.timedelta(days=2)
    first_two = list(Event.objects.order_by("id").values_list("id", flat=True)[:2])
    Event.objects.filter(pk__in=first_two).update(created_at=old)
    assert streams.event_cleanup() == 2
    newest = Event.objects.latest("id").pk

    async def scenario():
        gen = stream_for(alice, last_event_id=first_two[0] - 1)
        frames = await read(gen, events=1)
        await gen.aclose()
        return frames

    (resync,) = [f for f in async_to_sync(scenario)() if f.data]
    assert resync.event == "resync" and resync.id == str(newest)
    assert resync.json()["last_event_id"] == newest
    assert "no longer stored" in resync.json()["message"]


@pytest.mark.django_db
def test_clean_up_keeps_everything_after_the_newest_expired_event(alice, shop):
    deploy_to_live(shop, alice)
    events = list(Event.objects.order_by("id"))
    now = timezone.now()
    Event.objects.filter(pk=events[1].pk).update(created_at=now - dt.timedelta(seconds=120))
    assert streams.event_cleanup(now=now, retention_seconds=60) == 2  # the expired one and the one before it
    assert list(Event.objects.order_by("id").values_list("id", flat=True)) == [e.pk for e in events[2:]]
    assert streams.event_cleanup(now=now, retention_seconds=60) == 0


@pytest.mark.django_db
def test_a_quiet_stream_sends_heartbeat_comments(alice, shop):
    async def scenario():
        gen = streams.event_stream(Event.objects.all(), last_event_id=None, heartbeat=0.05, subscription=Prompt)
        await gen.__anext__()
        chunk = await asyncio.wait_for(gen.__anext__(), 5)
        await gen.aclose()
        return chunk

    assert async_to_sync(scenario)() == ": heartbeat\n\n"


@pytest.mark.django_db
def test_outsiders_get_none_of_an_apps_events(alice, charlie, shop):
    deploy_to_live(shop, alice)

    start = before_first()

    async def scenario():
        gen = stream_for(charlie, last_event_id=start, heartbeat=0.05)
        first = await gen.__anext__()
        chunk = await asyncio.wait_for(gen.__anext__(), 5)  # nothing for charlie: a heartbeat comes next
        await gen.aclose()
        return first, chunk

    first, chunk = async_to_sync(scenario)()
    assert (first, chunk) == ("retry: 3000\n\n", ": heartbeat\n\n")


# -- the view --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_view_filters_by_app_and_hides_apps_one_may_not_see(api, charlie, bob, shop):
    response = api(charlie).get("/api/v1/events?app=shop")
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "No app named 'shop'."
    response = api(bob).get("/api/v1/events?app=shop", HTTP_ACCEPT="text/event-stream")
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream; charset=utf-8"
    response.close()


@pytest.mark.django_db
@pytest.mark.parametrize("header", [{"HTTP_LAST_EVENT_ID": "abc"}, {}])
def test_a_bad_last_event_id_is_400(api, alice, header):
    path = "/api/v1/events" + ("" if header else "?last_event_id=-1")
    response = api(alice).get(path, **header)
    assert response.status_code == 400
    assert response.json()["error"]["field"] in ("Last-Event-ID", "last_event_id")


def test_anonymous_callers_get_no_stream(api):
    response = api().get("/api/v1/events", HTTP_ACCEPT="text/event-stream")
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "not_authenticated"


# -- over a real ASGI server -----------------------------------------------------------------


class HttpStream:
    """Frames off a live HTTP response, read incrementally from one iterator (a second iterator would close it)."""

    def __init__(self, response):
        self.response = response
        self.chunks = response.iter_content(chunk_size=None, decode_unicode=True)
        self.buffer = ""

    def read(self, count: int) -> list[Frame]:
        """Return the frames up to and including the ``count``-th one with data (count 0: the next frame)."""
        frames: list[Frame] = []
        while True:
            while "\n\n" in self.buffer:
                block, self.buffer = self.buffer.split("\n\n", 1)
                frames.extend(parse_frames(block + "\n\n"))
                if sum(1 for f in frames if f.data is not None) >= count and frames:
                    return frames
            chunk = next(self.chunks, None)
            if chunk is None:
                raise AssertionError(f"the stream ended after {frames}")
            self.buffer += chunk


def test_over_http_a_dropped_connection_resumes_with_last_event_id(live_web, alice, shop):
    _, raw = api_token_create(user=alice, name="ci")
    headers = {"Authorization": f"Bearer {raw}", "Accept": "text/event-stream"}
    url = live_web.url + "/api/v1/events?app=shop"

    with requests.get(url, headers=headers, stream=True, timeout=(5, 20)) as response:
        assert response.status_code == 200
        stream = HttpStream(response)
        (start,) = stream.read(0)  # where the stream starts: before anything below
        assert start.id is not None and start.data is None
        deploy_to_live(shop, alice)
        frames = stream.read(2)
    seen = ids(frames)[:2]  # the connection drops here, after two events

    headers["Last-Event-ID"] = str(seen[-1])
    with requests.get(url, headers=headers, stream=True, timeout=(5, 20)) as response:
        assert response.status_code == 200
        seen += ids(HttpStream(response).read(2))
    assert seen == list(Event.objects.filter(app=shop).order_by("id").values_list("id", flat=True))
