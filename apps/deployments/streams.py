"""Server-Sent Events: frames, and the loops that turn stored rows into a live, resumable stream.

Framework-light on purpose: each stream is an async generator of ``str`` frames that
the REST API and the web UI both hand to a ``StreamingHttpResponse``. The database is
the record: a stream reads rows with an id above the last one it sent, sends them,
then waits for a wake-up (``events.Subscription``) and reads again. A client that
reconnects with the last id it saw (``Last-Event-ID``) therefore misses nothing and
sees nothing twice, as long as the rows are still stored.

Format: https://html.spec.whatwg.org/multipage/server-sent-events.html
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.db.models import Max, Min, QuerySet
from django.utils import timezone

from apps.deployments.events import Subscription
from apps.deployments.lifecycle import SETTLED
from apps.deployments.models import Deployment, Event, LogLine

T = TypeVar("T")

# Comments keep idle connections open through proxies that close quiet ones.
HEARTBEAT_SECONDS = 15.0
# How long a browser waits before reconnecting, in milliseconds (the "retry:" field).
RETRY_MS = 3000
BATCH = 500


# -- frames ----------------------------------------------------------------------------------


def frame(*, data: Any = None, event: str | None = None, id: int | str | None = None, retry: int | None = None) -> str:
    """Return one SSE frame; ``data`` that is not a string is sent as JSON.

    A frame with an id but no data moves the client's last event id without firing an
    event, which is how a stream tells a client where it starts.
    """
    lines = []
    if retry is not None:
        lines.append(f"retry: {int(retry)}")
    if id is not None:
        lines.append(f"id: {_one_line(str(id))}")
    if event is not None:
        lines.append(f"event: {_one_line(event)}")
    if data is not None:
        text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"), default=str)
        # A newline inside data would end the field: each line becomes its own data field.
        lines.extend(f"data: {line}" for line in text.split("\n"))
    return "\n".join(lines) + "\n\n"


def comment(text: str = "") -> str:
    """Return a comment frame: ignored by clients, keeps the connection alive."""
    return f": {_one_line(text)}\n\n"


def _one_line(value: str) -> str:
    return value.replace("\r", " ").replace("\n", " ")


def parse_last_event_id(value: str | None) -> int | None:
    """Return the id a reconnecting client sent, or None; raise ValueError for one that is not a number."""
    if value is None or value.strip() == "":
        return None
    value = value.strip()
    if not value.isdigit():
        raise ValueError(f"Last-Event-ID must be a non-negative integer, not {value[:40]!r}.")
    return int(value)


# -- the loop ----------------------------------------------------------------------------------


async def db(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a database read from async code, on the thread Django gives the request."""
    return await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)


def _close_connection_if_idle() -> None:
    # A stream may hold its thread's connection for hours; give it back when done.
    # Inside a transaction (the test suite's) the connection is not ours to close.
    if not connection.in_atomic_block:
        connection.close()


async def follow(
    fetch: Callable[[int], Sequence[T]],
    *,
    after: int,
    key: Callable[[T], int],
    render: Callable[[T], str],
    done: Callable[[], object] | None = None,
    heartbeat: float = HEARTBEAT_SECONDS,
    subscription: Callable[[], Any] = Subscription,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[str]:
    """Yield ``render(row)`` for every row ``fetch(after)`` returns, then for new ones as they arrive.

    ``fetch(cursor)`` returns rows with a key above ``cursor``, in key order, at most BATCH.
    ``done()`` returns a true value once nothing more will come; the stream then sends what
    is left and ends. Without ``done`` it runs until the client goes away. A heartbeat
    comment goes out after ``heartbeat`` quiet seconds.
    """
    cursor = after
    try:
        async with subscription() as sub:
            last_sent = clock()
            while True:
                # Ask "finished?" before reading, so rows written just before the end are still sent.
                outcome = await db(done) if done is not None else None
                while True:
                    rows = await db(fetch, cursor)
                    for row in rows:
                        cursor = key(row)
                        yield render(row)
                    if rows:
                        last_sent = clock()
                    if len(rows) < BATCH:
                        break
                if outcome:
                    return
                quiet = clock() - last_sent
                if quiet >= heartbeat:
                    yield comment("heartbeat")
                    last_sent = clock()
                    quiet = 0.0
                await sub.wait(timeout=max(0.05, min(heartbeat - quiet, _fallback_wait())))
    finally:
        await db(_close_connection_if_idle)


def _fallback_wait() -> float:
    from apps.deployments import events

    return events.FALLBACK_WAIT


# -- the event stream ------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """The stored part of the event stream: ids from ``oldest`` to ``newest`` (None when empty)."""

    oldest: int | None
    newest: int | None


def can_resume(last_id: int, window: Window, *, last_id_stored: bool) -> bool:
    """Say whether a client that saw ``last_id`` can be sent exactly what it missed.

    Clean-up deletes the oldest events first, so what is stored is everything after some
    point. A client can resume when the event it saw is still stored, or when nothing
    between its id and the oldest stored one could have existed. An id above the newest
    one was never given out by this server (a restored database): the client must resync.
    """
    if last_id_stored:
        return True
    if window.newest is None:
        return last_id == 0
    if last_id > window.newest:
        return False
    assert window.oldest is not None
    return last_id >= window.oldest - 1


def event_window() -> Window:
    agg = Event.objects.aggregate(oldest=Min("id"), newest=Max("id"))
    return Window(agg["oldest"], agg["newest"])


def event_data(event: Event) -> dict[str, Any]:
    """Return what a client is told about one status or health change."""
    deployment = event.deployment
    data: dict[str, Any] = {
        "id": event.pk,
        "kind": event.kind,
        "app": event.app.name,
        "deployment": deployment.number if deployment else None,
        "from": event.from_value or None,
        "to": event.to_value,
        "reason": event.reason,
        "actor": event.actor,
        "time": _iso(event.created_at),
    }
    if event.kind == Event.Kind.STATUS:
        # The error as it stands now: a failed event carries the message a person acts on.
        data["error"] = deployment.error if deployment else ""
    if event.kind == Event.Kind.HEALTH:
        data["health"] = event.to_value.split(":", 1)[0]
    return data


def render_event(event: Event) -> str:
    return frame(id=event.pk, event=event.kind, data=event_data(event))


STREAMED_KINDS = (Event.Kind.STATUS, Event.Kind.HEALTH)


async def event_stream(
    events: QuerySet[Event],
    *,
    last_event_id: int | None,
    heartbeat: float = HEARTBEAT_SECONDS,
    subscription: Callable[[], Any] = Subscription,
) -> AsyncIterator[str]:
    """Yield status and health changes from ``events`` (already filtered to what the client may see).

    A client without ``last_event_id`` starts at the present: the first frame carries the
    id it starts after, so it can read current state and then rely on the stream. A
    client with one gets every event after it, or a ``resync`` event when some of what it
    missed is no longer stored.
    """
    events = events.filter(kind__in=STREAMED_KINDS).select_related("app", "deployment")

    async with subscription() as sub:
        # Subscribed before reading the position: nothing can fall between the two.
        window = await db(event_window)
        start = window.newest or 0
        if last_event_id is None:
            yield frame(retry=RETRY_MS, id=start)
        else:
            stored = await db(Event.objects.filter(pk=last_event_id).exists) if last_event_id else False
            if can_resume(last_event_id, window, last_id_stored=stored):
                start = last_event_id
                yield frame(retry=RETRY_MS)
            else:
                yield frame(
                    retry=RETRY_MS,
                    id=start,
                    event="resync",
                    data={
                        "last_event_id": start,
                        "message": f"Events after {last_event_id} are no longer stored (kept "
                        f"{settings.EVENT_RETENTION_SECONDS} s): read the current state again, then follow from here.",
                    },
                )

        def fetch(cursor: int) -> list[Event]:
            return list(events.filter(pk__gt=cursor).order_by("pk")[:BATCH])

        def reuse() -> Any:
            return _Borrowed(sub)

        async for chunk in follow(
            fetch, after=start, key=lambda e: e.pk, render=render_event, heartbeat=heartbeat, subscription=reuse
        ):
            yield chunk


class _Borrowed:
    """An already-open subscription lent to ``follow`` without closing it."""

    def __init__(self, sub: Any) -> None:
        self.sub = sub

    async def __aenter__(self) -> Any:
        return self.sub

    async def __aexit__(self, *exc: object) -> None:
        return None


def event_cleanup(*, now: dt.datetime | None = None, retention_seconds: int | None = None) -> int:
    """Delete events older than the retention; return how many went.

    Deletes by id up to the newest expired event, so what stays is always everything after
    one point and ``can_resume`` stays exact.
    """
    now = now or timezone.now()
    keep = retention_seconds if retention_seconds is not None else settings.EVENT_RETENTION_SECONDS
    cutoff = now - dt.timedelta(seconds=keep)
    newest_expired = Event.objects.filter(created_at__lt=cutoff).aggregate(n=Max("id"))["n"]
    if newest_expired is None:
        return 0
    deleted, _ = Event.objects.filter(pk__lte=newest_expired).delete()
    return deleted


# -- a deployment's stored log, followed -------------------------------------------------------


def log_line_data(line: LogLine) -> dict[str, Any]:
    return {"seq": line.seq, "step": line.step, "text": line.text, "time": _iso(line.timestamp)}


def render_log_line(line: LogLine) -> str:
    return frame(id=line.seq, event="log", data=log_line_data(line))


def format_log_line(line: LogLine) -> str:
    """Return one stored log line as plain text: time, step, text."""
    return f"{line.timestamp.astimezone(dt.UTC):%Y-%m-%dT%H:%M:%SZ} [{line.step}] {line.text}\n"


async def deploy_log_stream(
    deployment_id: int, *, after: int = 0, heartbeat: float = HEARTBEAT_SECONDS, subscription: Callable[[], Any] = Subscription
) -> AsyncIterator[str]:
    """Yield the deployment's log lines after seq ``after``, following new ones until it settles.

    Ends with an ``end`` event carrying the final status and error.
    """

    def fetch(cursor: int) -> list[LogLine]:
        return list(LogLine.objects.filter(deployment_id=deployment_id, seq__gt=cursor).order_by("seq")[:BATCH])

    def done() -> bool:
        status = Deployment.objects.filter(pk=deployment_id).values_list("status", flat=True).first()
        return status is None or status in SETTLED

    def end() -> str:
        deployment = Deployment.objects.filter(pk=deployment_id).values("number", "status", "error", "stopped_reason").first()
        return frame(event="end", data=deployment or {"status": None})

    yield frame(retry=RETRY_MS)
    async for chunk in follow(
        fetch,
        after=after,
        key=lambda line: line.seq,
        render=render_log_line,
        done=done,
        heartbeat=heartbeat,
        subscription=subscription,
    ):
        yield chunk
    yield await db(end)


# -- a blocking iterator (a pod's log from the cluster), streamed --------------------------------


async def iterate_in_thread(
    make: Callable[[], Iterator[T]], *, heartbeat: float = HEARTBEAT_SECONDS, max_queue: int = 1000
) -> AsyncIterator[T | None]:
    """Yield items of a blocking iterator run on its own thread; yield None after ``heartbeat`` quiet seconds.

    When the consumer stops, the thread is told to stop at its next item; an iterator
    blocked in a read ends when its own timeout does. An exception in the iterator is
    raised here.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=max_queue)
    stop = threading.Event()

    def put(item: tuple[str, Any]) -> None:
        if stop.is_set():
            return
        try:
            asyncio.run_coroutine_threadsafe(queue.put(item), loop).result()
        except RuntimeError:  # the loop is gone: nobody is listening any more
            stop.set()

    def run() -> None:
        try:
            iterator = make()
            try:
                for item in iterator:
                    if stop.is_set():
                        break
                    put(("item", item))
            finally:
                close = getattr(iterator, "close", None)
                if close is not None:
                    close()
            put(("end", None))
        except Exception as e:  # handed to the consumer
            put(("error", e))

    thread = threading.Thread(target=run, name="sse-source", daemon=True)
    thread.start()
    try:
        while True:
            try:
                kind, value = await asyncio.wait_for(queue.get(), timeout=heartbeat)
            except TimeoutError:
                yield None
                continue
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    finally:
        stop.set()
        # Unblock a producer waiting on a full queue.
        while not queue.empty():
            queue.get_nowait()


def _iso(value: dt.datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
