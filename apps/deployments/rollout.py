"""Judging rollouts and builds from what the cluster reports: pure functions over the API's JSON.

A verdict is reached only from facts that belong to this attempt: the Kubernetes
Deployment must have observed the generation our apply produced, and only the pods
of its newest ReplicaSet count. Failure is a set (see health.FAILURE_PHASES): an
image that never pulled fails the rollout although its pod is still Pending.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apps.deployments.health import FAILURE_PHASES, READINESS_GRACE, Reason, is_ready, pod_problem

Obj = Mapping[str, Any]
REVISION = "deployment.kubernetes.io/revision"


@dataclass(frozen=True)
class Verdict:
    outcome: str  # "live" or "failed"
    message: str = ""
    # For a crashed container: where to read the crash context from.
    pod: str = ""
    container: str = ""


def _conditions(obj: Obj) -> dict[str, Mapping[str, Any]]:
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or []}


def newest_replicaset(deployment: Obj, replicasets: Iterable[Obj]) -> Obj | None:
    """Return the ReplicaSet of the Deployment's current revision."""
    meta = deployment.get("metadata") or {}
    revision = (meta.get("annotations") or {}).get(REVISION)
    uid = meta.get("uid")
    for rs in replicasets:
        rs_meta = rs.get("metadata") or {}
        owned = any(o.get("uid") == uid for o in rs_meta.get("ownerReferences") or [])
        if owned and revision is not None and (rs_meta.get("annotations") or {}).get(REVISION) == revision:
            return rs
    return None


def pods_of(replicaset: Obj, pods: Iterable[Obj]) -> list[Obj]:
    uid = (replicaset.get("metadata") or {}).get("uid")
    return [
        p
        for p in pods
        if any(o.get("uid") == uid for o in (p.get("metadata") or {}).get("ownerReferences") or [])
        and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]


def judge_rollout(
    deployment: Obj | None, replicasets: Iterable[Obj], pods: Iterable[Obj], *, applied_generation: int | None, now: dt.datetime
) -> Verdict | None:
    """Return live or failed once the rollout of ``applied_generation`` has an outcome, else None."""
    if deployment is None or applied_generation is None:
        return None
    meta, spec, status = deployment.get("metadata") or {}, deployment.get("spec") or {}, deployment.get("status") or {}
    generation = meta.get("generation", 0)
    if generation < applied_generation or status.get("observedGeneration", 0) < generation:
        return None  # the controller-manager has not looked at our change yet
    rs = newest_replicaset(deployment, replicasets)
    new_pods = pods_of(rs, pods) if rs is not None else []

    for pod in new_pods:
        problem = pod_problem(pod, now=now)
        if problem is not None and problem.phase in FAILURE_PHASES:
            name = (pod.get("metadata") or {}).get("name", "")
            detail = f": {problem.message}" if problem.message else ""
            code = f" (exit code {problem.exit_code})" if problem.exit_code is not None and "(exit" not in problem.reason else ""
            return Verdict("failed", f"{problem.reason}{code} in pod {name}{detail}", pod=name, container=problem.container)

    progressing = _conditions(deployment).get("Progressing") or {}
    if progressing.get("status") == "False" and progressing.get("reason") == "ProgressDeadlineExceeded":
        seconds = spec.get("progressDeadlineSeconds", 600)
        running = [p for p in new_pods if (p.get("status") or {}).get("phase") == "Running"]
        why = f"; {Reason.READINESS} on {len(running)} pod(s)" if running and not any(is_ready(p) for p in running) else ""
        return Verdict("failed", f"ProgressDeadlineExceeded: the rollout did not finish within {seconds} s{why}")

    wanted = spec.get("replicas", 1)
    complete = (
        status.get("updatedReplicas", 0) >= wanted
        and status.get("replicas", 0) == status.get("updatedReplicas", 0)
        and status.get("availableReplicas", 0) >= wanted
        and status.get("readyReplicas", 0) >= wanted
    )
    if wanted == 0 or complete:
        return Verdict("live", f"{wanted} of {wanted} pod(s) ready")
    return None


def readiness_stalled(pods: Iterable[Obj], *, now: dt.datetime) -> bool:
    """Say whether running pods have been unready for longer than the grace period."""
    stalled = False
    for pod in pods:
        started = (pod.get("status") or {}).get("startTime")
        if started and not is_ready(pod):
            stalled = stalled or now - dt.datetime.fromisoformat(started.replace("Z", "+00:00")) > READINESS_GRACE
    return stalled


# -- builds -----------------------------------------------------------------------------------

BUILD_STEPS = ("clone", "plan", "build")


def _past_deadline(job: Obj, now: dt.datetime | None) -> bool:
    """Say whether a Job still running is past its deadline (some Job controllers only notice on their next sync)."""
    started = (job.get("status") or {}).get("startTime")
    seconds = (job.get("spec") or {}).get("activeDeadlineSeconds")
    complete = (_conditions(job).get("Complete") or {}).get("status") == "True"
    if now is None or not started or not seconds or complete:
        return False
    return now > dt.datetime.fromisoformat(started.replace("Z", "+00:00")) + dt.timedelta(seconds=seconds) + DEADLINE_GRACE


def build_step_states(pod: Obj) -> list[tuple[str, Mapping[str, Any]]]:
    """Return (container name, state) for the build pod's steps, in order."""
    status = pod.get("status") or {}
    found = {
        cs.get("name"): cs for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    }
    return [(name, found[name]) for name in BUILD_STEPS if name in found]


# How late the Job controller may be in enforcing activeDeadlineSeconds before Slipway does.
DEADLINE_GRACE = dt.timedelta(seconds=15)


def judge_build(job: Obj | None, pod: Obj | None, *, job_deleted: bool = False, now: dt.datetime | None = None) -> Verdict | None:
    """Return the build's outcome: live here means "built" (the message holds the termination message)."""
    if job_deleted:
        return Verdict("failed", "build failed: the build Job was deleted from outside Slipway")
    if job is None:
        return None
    conditions = _conditions(job)
    failed = conditions.get("Failed") or {}
    if failed.get("status") == "True" and failed.get("reason") == "DeadlineExceeded" or _past_deadline(job, now):
        # Checked before the containers: the Job controller kills them when time runs out,
        # and their exit codes would otherwise hide why.
        seconds = (job.get("spec") or {}).get("activeDeadlineSeconds")
        return Verdict("failed", f"build timed out after {seconds} s")
    if pod is not None:
        for name, cs in build_step_states(pod):
            state = cs.get("state") or {}
            term = state.get("terminated") or {}
            waiting = state.get("waiting") or {}
            if term and term.get("exitCode", 0) != 0:
                return Verdict("failed", "", pod=(pod.get("metadata") or {}).get("name", ""), container=name)
            if waiting.get("reason") in (
                "ErrImagePull",
                "ImagePullBackOff",
                "InvalidImageName",
                "CreateContainerConfigError",
                "CreateContainerError",
            ):
                return Verdict("failed", f"{name} failed: {waiting.get('reason')}: {waiting.get('message', '')}".rstrip(": "))
            if name == "build" and term and term.get("exitCode") == 0:
                return Verdict("live", term.get("message", ""))
    if failed.get("status") == "True":
        return Verdict("failed", f"build failed: {failed.get('reason', 'Job failed')}: {failed.get('message', '')}".rstrip(": "))
    complete = conditions.get("Complete") or {}
    if complete.get("status") == "True" and pod is None:
        return Verdict("failed", "build failed: the Job completed but its pod is gone, so the image digest is unknown")
    return None
