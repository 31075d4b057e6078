"""The stored deploy log: ordered, timestamped, scrubbed lines per deployment."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from apps.deployments import events
from apps.deployments.models import Deployment, LogLine

MASK = "********"


def scrub(text: str, *, secrets: Sequence[str] = (), max_chars: int | None = None) -> str:
    """Return ``text`` fit to store: NULs and trailing newlines removed, secret values masked, size capped."""
    limit = max_chars if max_chars is not None else settings.LOG_MAX_LINE_CHARS
    text = text.replace("\x00", "").rstrip("\r\n")
    # Longest first, so a secret that contains another is masked whole.
    for secret in sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, MASK)
    if len(text) > limit:
        text = text[:limit] + f" … [line cut at {limit} characters]"
    return text


def secret_values(deployment: Deployment) -> list[str]:
    """Return the values that must never appear in a stored log line."""
    app = deployment.app
    values = [v.value for v in app.env_vars.all() if v.secret or v.build_time]
    values += [app.git_credentials, app.webhook_secret]
    return [v for v in values if v]


def append(deployment: Deployment, step: str, text: str, *, timestamp: dt.datetime | None = None) -> None:
    """Store one line at the end of the deployment's log."""
    append_many(deployment, [(step, text, timestamp or timezone.now())])


def append_many(
    deployment: Deployment, lines: Iterable[tuple[str, str, dt.datetime]], *, secrets: Sequence[str] | None = None
) -> int:
    """Store lines in order after the last stored one; return how many were stored.

    The cap on lines per deployment keeps a runaway build from filling the database;
    the line that hits it says so.
    """
    lines = list(lines)
    if not lines:
        return 0
    if secrets is None:
        secrets = secret_values(deployment)
    for attempt in range(3):
        try:
            with transaction.atomic():
                last = LogLine.objects.filter(deployment=deployment).aggregate(n=Max("seq"))["n"] or 0
                room = settings.LOG_MAX_LINES - last
                if room <= 0:
                    return 0
                rows = [
                    LogLine(deployment=deployment, seq=last + i, step=step, text=scrub(text, secrets=secrets), timestamp=ts)
                    for i, (step, text, ts) in enumerate(lines[:room], start=1)
                ]
                if len(lines) > room:
                    rows[-1].text = f"[log cut: more than {settings.LOG_MAX_LINES} lines]"
                LogLine.objects.bulk_create(rows)
                transaction.on_commit(lambda: events.notify(app_id=deployment.app_id))
                return len(rows)
        except IntegrityError:
            # Two writers took the same sequence numbers; the loser tries again after the winner.
            if attempt == 2:
                raise
    return 0
