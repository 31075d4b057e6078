"""Runtime health and pod phases: pure functions from pods, as the Kubernetes API returns them.

The reasons and their wording are the spec's runtime-health table; the phases and
the failure set are the spec's pod-phase table (docs/concepts.md). Three rules from
the spec shape the code:

- failure is a set, not one value: a pod that never pulled its image is a failure
  although its Kubernetes phase is still Pending;
- terminated is a container state, not a pod phase: read container states;
- running and unhealthy can hold together: a crash-looping pod may be phase Running.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.db import models


class HealthState(models.TextChoices):
    NONE = "none"
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"


class Reason:
    """The runtime health reasons, worded exactly as the spec's table."""

    CRASH_LOOP = "CrashLoopBackOff"
    IMAGE_PULL_BACKOFF = "ImagePullBackOff"
    ERR_IMAGE_PULL = "ErrImagePull"
    EXITED = "{reason} (exit {code})"
    RESTARTING = "restarting repeatedly"
    READINESS = "readiness probe failing"
    NO_PODS = "no running pods"


REASON_MEANINGS = {
    Reason.CRASH_LOOP: "The app keeps crashing right after it starts, so Kubernetes is repeatedly restarting it "
    "with a growing delay between attempts",
    Reason.IMAGE_PULL_BACKOFF: "Kubernetes couldn't download the container image and is waiting before trying again",
    Reason.ERR_IMAGE_PULL: "Kubernetes couldn't download the container image — it may not exist, or access may be denied",
    Reason.EXITED: "The app's process exited unexpectedly with the given exit code "
    "(e.g. OOMKilled (exit 137) means it ran out of memory)",
    Reason.RESTARTING: "The app has restarted several times in the last few minutes, which usually means "
    "it's failing shortly after startup",
    Reason.READINESS: "The app is running, but it isn't passing the health checks it needs to pass before it can receive traffic",
    Reason.NO_PODS: "There's no running instance of this app right now",
}


class PodPhase:
    """The spec's pod phases: Kubernetes' five, refined by container states into the failure set."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"
    IMAGE_DOWNLOAD_FAILED = "IMAGE_DOWNLOAD_FAILED"
    INIT_FAILED = "INIT_FAILED"
    POD_CREATE_FAILED = "POD_CREATE_FAILED"
    PHASE_UNSPECIFIED = "PHASE_UNSPECIFIED"


PHASE_MEANINGS = {
    PodPhase.PENDING: "Accepted, not yet launched",
    PodPhase.RUNNING: "Every container that should be up is up",
    PodPhase.SUCCEEDED: "Terminated, with non-error exit codes",
    PodPhase.FAILED: "Ran, then some or all containers stopped running",
    PodPhase.UNKNOWN: "The device stopped responding",
    PodPhase.IMAGE_DOWNLOAD_FAILED: "The image pull failed",
    PodPhase.INIT_FAILED: "Validation or initialization failed — often compose syntax, or a full disk",
    PodPhase.POD_CREATE_FAILED: "The compose file is valid, but bringing the pod up failed",
    PodPhase.PHASE_UNSPECIFIED: "Unknown state; not normally used",
}

# Match the whole set: FAILED alone misses three of the four ways a pod can break.
FAILURE_PHASES = frozenset({PodPhase.FAILED, PodPhase.IMAGE_DOWNLOAD_FAILED, PodPhase.INIT_FAILED, PodPhase.POD_CREATE_FAILED})

IMAGE_PULL_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"}
)
CONFIG_REASONS = frozenset({"CreateContainerConfigError"})
CREATE_REASONS = frozenset({"CreateContainerError", "RunContainerError", "PreStartHookError", "PostStartHookError"})
CRASH_REASONS = frozenset({"CrashLoopBackOff"})
# Waiting reasons that are part of normal start-up, not a problem.
BENIGN_WAITING = frozenset({"ContainerCreating", "PodInitializing"})

RESTARTS_REPEATEDLY = 3
RESTART_WINDOW = dt.timedelta(minutes=10)
# A container that has stayed up this long since its last restart has recovered.
RECOVERED_AFTER = dt.timedelta(seconds=30)
# A pod that has just started is not ready yet; only after this long is it a failing probe.
READINESS_GRACE = dt.timedelta(seconds=30)


class Health(NamedTuple):
    state: str
    reason: str = ""

    @property
    def unhealthy(self) -> bool:
        return self.state == HealthState.UNHEALTHY


NO_INDICATOR = Health(HealthState.NONE)
HEALTHY = Health(HealthState.HEALTHY)


@dataclass(frozen=True)
class Problem:
    """Why one pod is not well: the health reason, the failure phase if any, and the pod's own message."""

    reason: str
    phase: str
    message: str = ""
    container: str = ""
    exit_code: int | None = None


def as_dict(pod: Any) -> Mapping[str, Any]:
    """Return the pod as the API's JSON (camelCase), from a V1Pod or a dict."""
    if isinstance(pod, Mapping):
        return pod
    from kubernetes.client import ApiClient  # only for its serializer: no cluster call

    return ApiClient().sanitize_for_serialization(pod)  # type: ignore[no-any-return]


def _statuses(status: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    return list(status.get(key) or [])


def _parse_time(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, str) and value:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def _exited(term: Mapping[str, Any]) -> str:
    return Reason.EXITED.format(reason=term.get("reason") or "Error", code=term.get("exitCode"))


def pod_problem(pod: Any, *, now: dt.datetime) -> Problem | None:
    """Return what is wrong with one pod, or None when it is well or still starting normally."""
    p = as_dict(pod)
    status = p.get("status") or {}
    kube_phase = status.get("phase") or ""

    for cs in _statuses(status, "initContainerStatuses"):
        state = cs.get("state") or {}
        waiting = state.get("waiting") or {}
        term = state.get("terminated") or {}
        if waiting.get("reason") in IMAGE_PULL_REASONS:
            return _waiting_problem(cs, waiting)
        if waiting.get("reason") in CONFIG_REASONS | CREATE_REASONS | CRASH_REASONS:
            last = (cs.get("lastState") or {}).get("terminated") or {}
            return Problem(
                waiting["reason"],
                PodPhase.INIT_FAILED,
                waiting.get("message", "") or last.get("message", ""),
                cs.get("name", ""),
                last.get("exitCode"),
            )
        if term and term.get("exitCode", 0) != 0:
            return Problem(_exited(term), PodPhase.INIT_FAILED, term.get("message", ""), cs.get("name", ""), term.get("exitCode"))

    for cs in _statuses(status, "containerStatuses"):
        state = cs.get("state") or {}
        waiting = state.get("waiting") or {}
        term = state.get("terminated") or {}
        last = (cs.get("lastState") or {}).get("terminated") or {}
        reason = waiting.get("reason", "")
        if reason in IMAGE_PULL_REASONS or reason in CONFIG_REASONS or reason in CREATE_REASONS:
            return _waiting_problem(cs, waiting)
        if reason in CRASH_REASONS:
            # The back-off hides the cause; a cause more specific than a plain error is worth naming.
            if last and last.get("reason") not in (None, "", "Error", "Completed"):
                return Problem(
                    _exited(last), PodPhase.FAILED, waiting.get("message", ""), cs.get("name", ""), last.get("exitCode")
                )
            return Problem(
                Reason.CRASH_LOOP, PodPhase.FAILED, waiting.get("message", ""), cs.get("name", ""), last.get("exitCode")
            )
        if term and (term.get("exitCode", 0) != 0 or term.get("reason") == "OOMKilled"):
            return Problem(_exited(term), PodPhase.FAILED, term.get("message", ""), cs.get("name", ""), term.get("exitCode"))
        if state.get("running") and last and cs.get("restartCount", 0) >= RESTARTS_REPEATEDLY:
            finished = _parse_time(last.get("finishedAt"))
            started = _parse_time(state["running"].get("startedAt"))
            recovered = started is not None and now - started > RECOVERED_AFTER
            if finished is not None and now - finished <= RESTART_WINDOW and not recovered:
                return Problem(
                    Reason.RESTARTING, PodPhase.RUNNING, last.get("message", ""), cs.get("name", ""), last.get("exitCode")
                )

    if kube_phase == "Failed":
        return Problem(Reason.NO_PODS, PodPhase.FAILED, status.get("message", "") or status.get("reason", ""))
    return None


def _waiting_problem(cs: Mapping[str, Any], waiting: Mapping[str, Any]) -> Problem:
    reason = waiting.get("reason", "")
    if reason in IMAGE_PULL_REASONS:
        phase = PodPhase.IMAGE_DOWNLOAD_FAILED
    elif reason in CONFIG_REASONS:
        phase = PodPhase.INIT_FAILED
    else:
        phase = PodPhase.POD_CREATE_FAILED
    return Problem(reason, phase, waiting.get("message", ""), cs.get("name", ""))


def pod_phase(pod: Any, *, now: dt.datetime) -> str:
    """Return the spec's phase for one pod: a failure phase when its containers say so."""
    p = as_dict(pod)
    problem = pod_problem(p, now=now)
    if problem is not None and problem.phase in FAILURE_PHASES:
        return problem.phase
    kube_phase = (p.get("status") or {}).get("phase") or ""
    return {
        "Pending": PodPhase.PENDING,
        "Running": PodPhase.RUNNING,
        "Succeeded": PodPhase.SUCCEEDED,
        "Failed": PodPhase.FAILED,
        "Unknown": PodPhase.UNKNOWN,
    }.get(kube_phase, PodPhase.PHASE_UNSPECIFIED)


def is_ready(pod: Any) -> bool:
    p = as_dict(pod)
    conditions = (p.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _is_running(p: Mapping[str, Any]) -> bool:
    status = p.get("status") or {}
    return status.get("phase") == "Running" and not (p.get("metadata") or {}).get("deletionTimestamp")


# Worst first: when pods disagree, the indicator names the most serious problem.
_SEVERITY = [Reason.ERR_IMAGE_PULL, Reason.IMAGE_PULL_BACKOFF, Reason.CRASH_LOOP]


def _severity(reason: str) -> int:
    if reason in _SEVERITY:
        return _SEVERITY.index(reason)
    if reason.endswith(")") and "(exit " in reason:
        return len(_SEVERITY)
    if reason in (Reason.RESTARTING,):
        return len(_SEVERITY) + 2
    return len(_SEVERITY) + 1  # other container errors (CreateContainerConfigError, …)


def classify(pods: Iterable[Any], *, serving: bool, now: dt.datetime) -> Health:
    """Return the app's runtime health from its pods.

    ``serving`` says whether the last deploy succeeded (the current deployment is live):
    before that, and while nothing should run, no indicator is shown.
    """
    if not serving:
        return NO_INDICATOR
    pods = [as_dict(p) for p in pods]
    problems = [pr for pr in (pod_problem(p, now=now) for p in pods) if pr is not None and pr.reason != Reason.NO_PODS]
    if problems:
        return Health(HealthState.UNHEALTHY, min(problems, key=lambda pr: _severity(pr.reason)).reason)
    running = [p for p in pods if _is_running(p)]
    if not running:
        return Health(HealthState.UNHEALTHY, Reason.NO_PODS)
    if not any(is_ready(p) for p in running) or any(_not_ready_for_long(p, now) for p in running):
        return Health(HealthState.UNHEALTHY, Reason.READINESS)
    return HEALTHY


def _not_ready_for_long(p: Mapping[str, Any], now: dt.datetime) -> bool:
    started = _parse_time((p.get("status") or {}).get("startTime"))
    return not is_ready(p) and started is not None and now - started > READINESS_GRACE
