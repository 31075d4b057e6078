"""Pure functions that turn rows into what the pages show: badges, health wording, phase durations, SSE frames."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apps.deployments.health import REASON_MEANINGS, HealthState, Reason
from apps.deployments.lifecycle import IN_FLIGHT, MEANINGS, Status

_EXITED = re.compile(r"^(?P<reason>.+) \(exit (?P<code>-?\d+|None)\)$")


@dataclass(frozen=True)
class Badge:
    """A status as words and a colour class; the words carry the meaning, the colour only repeats it."""

    label: str
    css: str
    meaning: str
    icon: str = ""


# Shapes repeat the status for people who cannot tell the colours apart.
ICONS: dict[str, str] = {
    Status.PENDING: "◷",
    Status.BUILDING: "⚙",
    Status.DEPLOYING: "⇡",
    Status.LIVE: "✓",
    Status.FAILED: "✕",
    Status.STOPPED: "■",
}


def status_badge(status: str | None) -> Badge:
    """Return the badge of a deployment status, or of an app that has never been deployed."""
    if not status:
        return Badge("not deployed", "neutral", "No deployment yet: use Rebuild or Deploy new to start one", "○")
    css_classes: dict[str, str] = {
        Status.PENDING: "pending",
        Status.BUILDING: "progress",
        Status.DEPLOYING: "progress",
        Status.LIVE: "ok",
        Status.FAILED: "bad",
        Status.STOPPED: "neutral",
    }
    return Badge(status, css_classes.get(status, "neutral"), MEANINGS.get(status, ""), ICONS.get(status, ""))


@dataclass(frozen=True)
class HealthIndicator:
    label: str
    css: str
    reason: str
    meaning: str
    icon: str = ""


def health_meaning(reason: str) -> str:
    """Return the spec's explanation of a health reason, including the ``{reason} (exit {code})`` form."""
    if reason in REASON_MEANINGS:
        return REASON_MEANINGS[reason]
    if _EXITED.match(reason):
        return REASON_MEANINGS[Reason.EXITED]
    return ""


def health_indicator(state: str, reason: str) -> HealthIndicator | None:
    """Return the runtime health indicator, or None when the spec says to show none.

    The spec shows an indicator only for a problem: "No indicator is shown while a
    deployment has no pods yet or while the app is healthy."
    """
    if state == HealthState.UNHEALTHY:
        return HealthIndicator("Unhealthy", "bad", reason, health_meaning(reason), "⚠")
    return None


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float | None  # None: the phase was skipped
    running: bool  # still under way: the duration counts up to now


def phase_durations(d: Any, *, now: dt.datetime) -> list[Phase]:
    """Return how long each phase of a deployment took, from its stamps.

    ``d`` has ``status`` and the stamps ``created_at``, ``building_at``, ``deploying_at``,
    ``live_at``, ``failed_at`` and ``stopped_at``. Pending ends when building (or, for image
    apps, deploying) starts; a phase that the deployment left by failing or stopping ends at
    that stamp. A Redeploy restamps ``deploying_at``, so its deploying phase is the latest one.
    """
    end = d.live_at or d.failed_at or d.stopped_at
    phases: list[Phase] = []

    def span(name: str, start: dt.datetime | None, stop: dt.datetime | None, status: str) -> None:
        if start is None:
            return
        if stop is None:
            running = d.status == status
            stop = now if running else (end or now)
            phases.append(Phase(name, max((stop - start).total_seconds(), 0.0), running))
        else:
            phases.append(Phase(name, max((stop - start).total_seconds(), 0.0), False))

    span(Status.PENDING, d.created_at, d.building_at or d.deploying_at, Status.PENDING)
    span(Status.BUILDING, d.building_at, d.deploying_at, Status.BUILDING)
    deploy_end = d.live_at or d.failed_at or d.stopped_at
    if d.deploying_at and deploy_end and deploy_end < d.deploying_at:
        deploy_end = None  # a stamp from before a Redeploy does not end the new attempt
    span(Status.DEPLOYING, d.deploying_at, deploy_end, Status.DEPLOYING)
    return phases


def duration_text(seconds: float | None) -> str:
    """Return a short human duration: 4s, 2m 05s, 1h 03m."""
    if seconds is None:
        return "—"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m"


def image_short(image: str) -> str:
    """Return an image reference short enough for a table: the digest cut to 12 hex digits."""
    if "@sha256:" in image:
        repo, digest = image.split("@sha256:", 1)
        return f"{repo}@sha256:{digest[:12]}"
    return image


def source_summary(app: Any) -> str:
    """Return the commit or image tag the app serves or last attempted."""
    current = app.current_deployment
    if app.source == "git":
        return current.short_sha if current is not None and current.commit_sha else ""
    if current is not None and current.image:
        return image_short(current.image)
    return f"{app.image_url}:{app.image_tag}"


def is_in_flight(status: str | None) -> bool:
    return status in IN_FLIGHT


def parse_env_lines(text: str) -> tuple[dict[str, str], list[str]]:
    """Parse ``NAME=value`` lines; return the variables and one message per bad line.

    Blank lines and lines starting with ``#`` are skipped; a value may contain ``=``.
    """
    values: dict[str, str] = {}
    errors: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not name:
            errors.append(f"Line {number}: write NAME=value, e.g. DATABASE_URL=postgres://db/shop.")
            continue
        if name in values:
            errors.append(f"Line {number}: {name} is set twice.")
            continue
        values[name] = value
    return values, errors


def pod_labels_needed(pods: Iterable[str], replicas: int) -> bool:
    """Say whether log lines need their pod's name: when several pods speak or are expected."""
    return replicas > 1 or len(set(pods)) > 1


def step_sections(lines: Iterable[Any], *, previous_step: str = "") -> list[tuple[str, list[Any]]]:
    """Group consecutive log lines by step; a section's marker is empty when it continues ``previous_step``.

    The page marks where clone, plan, build, push and rollout start; a streamed batch passes the
    step of the last line already shown, so a step that carries on gets no second marker.
    """
    sections: list[tuple[str, list[Any]]] = []
    current = previous_step
    for line in lines:
        if not sections or line.step != current:
            sections.append((line.step if line.step != current else "", []))
            current = line.step
        sections[-1][1].append(line)
    return sections


def message_dict_to_fields(message_dict: Mapping[str, list[str]], fields: Iterable[str]) -> dict[str | None, list[str]]:
    """Map a ValidationError's fields onto a form's: unknown fields become errors of the whole form."""
    known = set(fields)
    out: dict[str | None, list[str]] = {}
    for field, messages in message_dict.items():
        key = field if field in known else None
        out.setdefault(key, []).extend(messages)
    return out


def action_description(action: str, *, app: Any) -> str:
    """Return what an action will do, in the spec's words, for its confirm step."""
    current = app.current_deployment
    if action == "redeploy":
        return (
            f"Re-applies the Kubernetes manifests of #{current.number if current else '?'} with the same image. "
            "Settings (port, environment variables, secrets) are read fresh, so changes you saved since the last "
            "deploy are picked up without a rebuild."
        )
    if action == "rebuild":
        return (
            f"Creates a new deployment and builds the latest commit on branch {app.branch}: "
            "git clone → image build → push → deploy."
        )
    if action == "deploy-new":
        return (
            f"Creates a new deployment and resolves {app.image_url}:{app.image_tag} to a digest again, so an image "
            "pushed to that tag since the last deploy is used."
        )
    if action == "rollback":
        return "Creates a new deployment that serves an earlier live deployment's image with the settings it ran with."
    if action == "cancel":
        status = current.status if current else ""
        number = current.number if current else "?"
        return (
            f"Stops deployment #{number}, which is still {status}, and removes its build Job. The app keeps what it serves now."
        )
    if action == "stop":
        return (
            "Tears down the app's Kubernetes resources and marks its deployment stopped. "
            "The app stops serving until you Redeploy or deploy again."
        )
    return ""
