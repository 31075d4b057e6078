"""Live parts of the pages over Server-Sent Events: the same partials the pages render, sent again when they change.

htmx's SSE extension swaps each event's HTML into the element whose ``sse-swap`` names it.
The loops are apps.deployments.streams.follow: read rows after the last id sent, send,
wait for a wake-up, repeat; a reconnecting browser sends ``Last-Event-ID`` and resumes
there. The reads and the rendering run on the request's database thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Max
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from apps.api import app_logs
from apps.deployments import selectors
from apps.deployments import streams as sse
from apps.deployments.lifecycle import SETTLED, Status
from apps.deployments.models import App, Deployment, Event, LogLine
from apps.web import presenters, views

log = logging.getLogger(__name__)

APP_PARTS = ("status", "health", "actions", "history")
# A stream ends after this long; the browser reconnects with Last-Event-ID and carries on.
MAX_STREAM_SECONDS = 30 * 60
APP_LOG_LIVE_CHECK_SECONDS = 5.0
APP_LOG_RESTART_SECONDS = 1.0
# Recent lines per container when the panel opens; a restarted read (new pods) starts at the present.
APP_LOG_TAIL = 100
APP_LOG_MAX_RESTART_SECONDS = 15.0


class BadCursor(ValueError):
    pass


def resume_point(request: HttpRequest) -> int:
    """Return the id a stream starts after: ``Last-Event-ID`` from a reconnecting browser, else the page's ``after``."""
    header = request.headers.get("Last-Event-ID")
    try:
        value = sse.parse_last_event_id(header)
        if value is None:
            value = sse.parse_last_event_id(request.GET.get("after"))
    except ValueError as e:
        raise BadCursor(str(e).replace("Last-Event-ID", "Last-Event-ID (or after)")) from None
    return value or 0


def _stream(chunks: AsyncIterator[str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chunks, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache, no-transform"
    # nginx and similar proxies would otherwise hold the stream back in their buffers.
    response["X-Accel-Buffering"] = "no"
    return response


def _bad_cursor(e: BadCursor) -> HttpResponse:
    return HttpResponse(str(e), status=400, content_type="text/plain; charset=utf-8")


async def _app_for(request: HttpRequest, name: str) -> App:
    user = await request.auser()
    try:
        return await sse.db(selectors.app_get_for_user, user=user, name=name)
    except App.DoesNotExist:
        raise Http404("No such app.") from None


async def _limited(chunks: AsyncIterator[str], *, seconds: float = MAX_STREAM_SECONDS) -> AsyncIterator[str]:
    """Pass chunks on until ``seconds`` have gone by; the browser then reconnects where it was."""
    deadline = time.monotonic() + seconds
    async for chunk in chunks:
        yield chunk
        if time.monotonic() > deadline:
            return


# -- the app page ----------------------------------------------------------------------------


def app_page_frames(app_id: int, after: int) -> list[tuple[int, str]]:
    """Return the app page's live partials as one batch of frames if any event came after ``after``."""
    newest = Event.objects.filter(app_id=app_id, pk__gt=after).aggregate(n=Max("id"))["n"]
    if newest is None:
        return []
    app = App.objects.select_related("current_deployment").filter(pk=app_id).first()
    if app is None:
        return [(newest, sse.frame(event="gone", data="This app was deleted.", id=newest))]
    context = views.live_context(app)
    frames = "".join(
        sse.frame(event=part, data=render_to_string(f"web/app_detail.html#{part}", context), id=newest) for part in APP_PARTS
    )
    return [(newest, frames)]


@login_required
@require_GET
async def app_events(request: HttpRequest, name: str) -> HttpResponseBase:
    """The app page's status, health, actions and history, each time one of them changes."""
    app = await _app_for(request, name)
    try:
        after = resume_point(request)
    except BadCursor as e:
        return _bad_cursor(e)

    async def chunks() -> AsyncIterator[str]:
        yield sse.frame(retry=sse.RETRY_MS)
        async for chunk in sse.follow(
            lambda cursor: app_page_frames(app.pk, cursor), after=after, key=lambda r: r[0], render=lambda r: r[1]
        ):
            yield chunk

    return _stream(_limited(chunks()))


# -- the apps list -----------------------------------------------------------------------------


def app_list_frames(user: Any, after: int) -> list[tuple[int, str]]:
    """Return a new row for each visible app with an event after ``after``."""
    apps = selectors.apps_visible_to(user)
    changed = Event.objects.filter(app__in=apps, pk__gt=after).values("app_id").annotate(n=Max("id")).order_by("n")
    newest = {row["app_id"]: row["n"] for row in changed}
    if not newest:
        return []
    top = max(newest.values())
    rows = views.app_rows(apps.filter(pk__in=newest))
    frames = "".join(
        sse.frame(event=f"app-{row['app'].pk}", data=render_to_string("web/app_list.html#app_row", row), id=top) for row in rows
    )
    return [(top, frames)]


@login_required
@require_GET
async def app_list_events(request: HttpRequest) -> HttpResponseBase:
    """The rows of the apps list, each time an app's status or health changes."""
    user = await request.auser()
    try:
        after = resume_point(request)
    except BadCursor as e:
        return _bad_cursor(e)

    async def chunks() -> AsyncIterator[str]:
        yield sse.frame(retry=sse.RETRY_MS)
        async for chunk in sse.follow(
            lambda cursor: app_list_frames(user, cursor), after=after, key=lambda r: r[0], render=lambda r: r[1]
        ):
            yield chunk

    return _stream(_limited(chunks()))


# -- a deployment's log ----------------------------------------------------------------------


class LogRenderer:
    """Render stored log lines as the page does, remembering the step of the last line sent."""

    def __init__(self, deployment: Deployment, last_step: str) -> None:
        self.deployment = deployment
        self.last_step = last_step

    def fetch(self, cursor: int) -> list[tuple[int, str]]:
        """Return one entry per new line; the last carries the whole batch's HTML in one frame.

        One entry per line keeps ``follow`` reading while full batches come back; one frame
        per batch lets the browser swap a batch at once.
        """
        lines = list(LogLine.objects.filter(deployment_id=self.deployment.pk, seq__gt=cursor).order_by("seq")[: sse.BATCH])
        if not lines:
            return []
        html = render_to_string(
            "web/deployment_detail.html#log_lines", views.log_context(self.deployment, lines, previous_step=self.last_step)
        )
        self.last_step = lines[-1].step
        entries = [(line.seq, "") for line in lines[:-1]]
        entries.append((lines[-1].seq, sse.frame(event="log", data=html, id=lines[-1].seq)))
        return entries

    def done(self) -> bool:
        status = Deployment.objects.filter(pk=self.deployment.pk).values_list("status", flat=True).first()
        return status is None or status in SETTLED

    def end(self) -> str:
        """Return the final header (status, error, durations) and the event that closes the stream."""
        deployment = Deployment.objects.select_related("app").filter(pk=self.deployment.pk).first()
        if deployment is None:
            return sse.frame(event="end", data="")
        header = render_to_string("web/deployment_detail.html#header", views.deployment_context(deployment.app, deployment))
        return sse.frame(event="header", data=header) + sse.frame(event="end", data=deployment.status)


def _last_step(deployment_id: int, seq: int) -> str:
    return (
        LogLine.objects.filter(deployment_id=deployment_id, seq__lte=seq).order_by("-seq").values_list("step", flat=True).first()
        or ""
    )


@login_required
@require_GET
async def deployment_log_events(request: HttpRequest, name: str, number: int) -> HttpResponseBase:
    """The deployment's log lines as they are stored, until it settles; then its final header."""
    app = await _app_for(request, name)
    deployment = await sse.db(lambda: Deployment.objects.filter(app=app, number=number).first())
    if deployment is None:
        raise Http404("No such deployment.")
    try:
        after = resume_point(request)
    except BadCursor as e:
        return _bad_cursor(e)
    renderer = LogRenderer(deployment, await sse.db(_last_step, deployment.pk, after))

    async def chunks() -> AsyncIterator[str]:
        yield sse.frame(retry=sse.RETRY_MS)
        async for chunk in sse.follow(renderer.fetch, after=after, key=lambda r: r[0], render=lambda r: r[1], done=renderer.done):
            if chunk:
                yield chunk
        yield await sse.db(renderer.end)

    return _stream(_limited(chunks()))


# -- the app's own output ----------------------------------------------------------------------


def _is_live(app_id: int) -> bool:
    return Deployment.objects.filter(app_id=app_id, status=Status.LIVE).exists()


def app_log_frame(batch: list[tuple[str, str, str]], *, show_pod: bool) -> str:
    html = render_to_string("web/app_logs.html#app_log_lines", {"lines": batch, "show_pod": show_pod})
    return sse.frame(event="line", data=html)


def _end_frame(message: str) -> str:
    html = render_to_string("web/app_logs.html#app_log_note", {"message": message})
    return sse.frame(event="line", data=html) + sse.frame(event="end", data=message)


async def app_log_chunks(
    app: App, *, source: Callable[..., Iterator[tuple[str, str, str]]], live: Callable[[int], bool] = _is_live
) -> AsyncIterator[str]:
    """Yield the running pods' output while the app is live; follow new pods when the source ends (a redeploy).

    ``source(namespace, label_selector, tail_lines)`` is apps.api.app_logs' contract.
    """
    yield sse.frame(retry=sse.RETRY_MS)
    selector = await sse.db(app_logs.pod_selector, app)
    seen: set[str] = set()
    delay = APP_LOG_RESTART_SECONDS
    tail = APP_LOG_TAIL
    while True:
        if not await sse.db(live, app.pk):
            yield _end_frame("The app is not live, so there is no output to follow. Open this panel again once it is.")
            return
        last_check = time.monotonic()

        def read(lines: int = tail) -> Iterator[tuple[str, str, str]]:
            return source(app.namespace, selector, lines)

        try:
            async for item in sse.iterate_in_thread(read, heartbeat=APP_LOG_LIVE_CHECK_SECONDS):
                if item is not None:
                    pod, container, text = item
                    seen.add(pod)
                    delay = APP_LOG_RESTART_SECONDS
                    yield app_log_frame([(pod, container, text)], show_pod=presenters.pod_labels_needed(seen, app.replicas))
                if time.monotonic() - last_check >= APP_LOG_LIVE_CHECK_SECONDS:
                    last_check = time.monotonic()
                    if not await sse.db(live, app.pk):
                        yield _end_frame("The app stopped being live; the stream ended.")
                        return
                    if item is None:
                        yield sse.comment("heartbeat")
        except app_logs.LogsUnavailable as e:  # no retry can help
            yield _end_frame(str(e))
            return
        except Exception as e:  # the cluster could not be read: say so, then try again
            log.warning("app logs of %s: %s", app.name, e)
            yield sse.frame(
                event="line",
                data=render_to_string("web/app_logs.html#app_log_note", {"message": f"Log stream interrupted: {e}. Retrying…"}),
            )
        # The pods went away (a redeploy replaces them) or the read failed: look again, backing off.
        tail = 0
        await asyncio.sleep(delay)
        delay = min(delay * 2, APP_LOG_MAX_RESTART_SECONDS)


@login_required
@require_GET
async def app_log_events(request: HttpRequest, name: str) -> HttpResponseBase:
    """The live stdout and stderr of the app's pods; not stored, so nothing to resume."""
    app = await _app_for(request, name)
    return _stream(_limited(app_log_chunks(app, source=app_logs.source)))
