"""The controller: watches Slipway's Jobs, Pods, ReplicaSets and Deployments and records what they mean.

It watches, it does not poll: each kind is listed once, then watched from that
resource version with bookmarks; a 410 Gone relists, a dropped connection or an
API server error reconnects with back-off. Every change marks its app dirty; one
thread judges dirty apps from the watch caches with the pure functions of
``rollout`` and ``health`` and writes to the database only when something changed.
Build pods' logs are copied into the deployment's stored log as they are written.

Only one controller acts at a time: a coordination.k8s.io Lease elects it. Killed
and restarted, it relists and reaches the same truth (nothing it knows lives only
in memory).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import queue
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from apps.deployments import health, health_store, logs, tasks
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import App, Deployment, LogLine
from apps.deployments.rollout import Verdict, judge_build, judge_rollout
from builder import specs
from builder.kube import Cluster, ClusterError, WatchExpired

log = logging.getLogger(__name__)

Obj = dict[str, Any]
KINDS = ("Job", "Pod", "ReplicaSet", "Deployment")
# Re-judge every app this often from the caches: "restarting repeatedly" ages out with time alone.
RESYNC_SECONDS = 30
LEASE_NAME = "slipway-controller"
LEASE_SECONDS = 15
PUSH_MARKERS = ("exporting to image", "pushing layers", "pushing manifest", "exporting manifest")


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


class Informer:
    """A watch cache of one kind, cluster-wide, for objects Slipway manages."""

    def __init__(self, kube: Cluster, kind: str, on_change: Callable[[str, Obj], None], stop: threading.Event) -> None:
        self.kube, self.kind, self.on_change, self.stop = kube, kind, on_change, stop
        self.store: dict[tuple[str, str], Obj] = {}
        self.lock = threading.Lock()
        self.synced = threading.Event()
        self.resource_version = ""
        self.relists = 0

    def items(self) -> list[Obj]:
        with self.lock:
            return list(self.store.values())

    def get(self, namespace: str, name: str) -> Obj | None:
        with self.lock:
            return self.store.get((namespace, name))

    def relist(self) -> None:
        listing = self.kube.list(self.kind, selector=f"{specs.LABEL_MANAGED_BY}={specs.MANAGED_BY}")
        fresh = {_key(o): {**o, "kind": self.kind} for o in listing.get("items", [])}
        with self.lock:
            gone = [o for k, o in self.store.items() if k not in fresh]
            self.store = fresh
            self.resource_version = listing["metadata"]["resourceVersion"]
        self.relists += 1
        for obj in gone:
            self.on_change("DELETED", obj)
        for obj in fresh.values():
            self.on_change("SYNC", obj)
        self.synced.set()

    def run(self) -> None:
        backoff = 0.5
        need_list = True
        while not self.stop.is_set():
            try:
                if need_list:
                    self.relist()
                    need_list = False
                    backoff = 0.5
                for event in self.kube.watch(
                    self.kind,
                    selector=f"{specs.LABEL_MANAGED_BY}={specs.MANAGED_BY}",
                    resource_version=self.resource_version,
                    seconds=60,
                ):
                    backoff = 0.5
                    kind, obj = event["type"], event["object"]
                    self.resource_version = obj.get("metadata", {}).get("resourceVersion", self.resource_version)
                    if kind == "BOOKMARK":
                        continue
                    obj = {**obj, "kind": self.kind}
                    with self.lock:
                        if kind == "DELETED":
                            self.store.pop(_key(obj), None)
                        else:
                            self.store[_key(obj)] = obj
                    self.on_change(kind, obj)
                    if self.stop.is_set():
                        return
            except WatchExpired:
                need_list = True
            except ClusterError as e:
                log.warning("watch %s: %s; reconnecting in %.1f s", self.kind, e.message, backoff)
                need_list = e.status is not None and e.status >= 500 or need_list
                self.stop.wait(backoff + random.uniform(0, backoff / 2))  # noqa: S311 (jitter)
                backoff = min(backoff * 2, 30)
            except Exception:
                log.exception("watch %s failed; relisting", self.kind)
                need_list = True
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 30)


class LogCopier:
    """Copies build pod container logs into the deployment's stored log, each line once."""

    def __init__(self, kube: Cluster, stop: threading.Event) -> None:
        self.kube, self.stop = kube, stop
        self.following: set[tuple[str, str, str]] = set()
        self.lock = threading.Lock()
        self.copy_locks: dict[int, threading.Lock] = {}

    def _copy_lock(self, deployment_id: int) -> threading.Lock:
        with self.lock:
            return self.copy_locks.setdefault(deployment_id, threading.Lock())

    def follow(self, deployment_id: int, namespace: str, pod: str, container: str) -> None:
        """Start streaming one running container's log, unless already streaming it."""
        key = (namespace, pod, container)
        with self.lock:
            if key in self.following:
                return
            self.following.add(key)
        threading.Thread(
            target=self._follow, args=(deployment_id, namespace, pod, container), daemon=True, name=f"log-{pod}-{container}"
        ).start()

    def _follow(self, deployment_id: int, namespace: str, pod: str, container: str) -> None:
        try:
            self.copy(deployment_id, namespace, pod, container, follow=True)
        except ClusterError as e:
            log.info("log stream of %s/%s ended: %s", pod, container, e.message)
        finally:
            with self.lock:
                self.following.discard((namespace, pod, container))
            close_old_connections()

    def copy(self, deployment_id: int, namespace: str, pod: str, container: str, *, follow: bool = False) -> None:
        """Store the container's lines that are newer than what is stored for its step."""
        deployment = Deployment.objects.select_related("app").get(pk=deployment_id)
        step = container if container in ("clone", "plan") else "build"
        secrets = logs.secret_values(deployment)

        def last_stored() -> dt.datetime | None:
            lines = LogLine.objects.filter(deployment=deployment, step__in=_steps_of(step))
            return lines.order_by("-seq").values_list("timestamp", flat=True).first()

        def flush(batch: list[tuple[str, str, dt.datetime]]) -> None:
            # A follower and a catch-up may copy the same container: whoever stores second
            # keeps only what the first did not (timestamps order a container's lines).
            with self._copy_lock(deployment_id):
                newest = last_stored()
                logs.append_many(deployment, [line for line in batch if newest is None or line[2] > newest], secrets=secrets)

        with self._copy_lock(deployment_id):
            last = last_stored()
        since = last.isoformat().replace("+00:00", "Z") if last else None
        batch: list[tuple[str, str, dt.datetime]] = []
        for raw in self.kube.pod_log(namespace, pod, container, follow=follow, timestamps=True, since_time=since):
            stamp, _, text = raw.partition(" ")
            try:
                when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            except ValueError:
                when, text = timezone.now(), raw
            if last is not None and when <= last:
                continue  # copied before (sinceTime is inclusive and second-grained)
            if step != "clone" and step != "plan" and any(m in text.lower() for m in PUSH_MARKERS):
                step = "push"
            batch.append((step, text, when))
            last = when
            if follow or len(batch) >= 200:
                flush(batch)
                batch = []
            if self.stop.is_set():
                break
        if batch:
            flush(batch)


def _container_statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def _steps_of(step: str) -> list[str]:
    return ["build", "push"] if step in ("build", "push") else [step]


class Controller:
    def __init__(self, kube: Cluster, *, identity: str | None = None) -> None:
        self.kube = kube
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}"
        self.stop = threading.Event()
        self.dirty: queue.Queue[str] = queue.Queue()
        self.informers = {kind: Informer(kube, kind, self._changed, self.stop) for kind in KINDS}
        self.logs = LogCopier(kube, self.stop)
        self.deleted_jobs: set[tuple[str, str]] = set()

    # -- events -> dirty apps ------------------------------------------------------------------

    def _changed(self, event: str, obj: Obj) -> None:
        app = _labels(obj).get(specs.LABEL_APP)
        if not app:
            return
        if event == "DELETED" and obj.get("kind") == "Job":
            self.deleted_jobs.add(_key(obj))
        self.dirty.put(app)

    # -- the loop ------------------------------------------------------------------------------

    def start_informers(self) -> None:
        for informer in self.informers.values():
            threading.Thread(target=informer.run, daemon=True, name=f"watch-{informer.kind}").start()

    def run(self) -> None:
        """Watch and judge until stopped."""
        self.start_informers()
        for informer in self.informers.values():
            while not informer.synced.wait(1):
                if self.stop.is_set():
                    return
        log.info("controller %s: caches synced", self.identity)
        self.resync()
        next_resync = timezone.now() + dt.timedelta(seconds=RESYNC_SECONDS)
        while not self.stop.is_set():
            try:
                name = self.dirty.get(timeout=1)
            except queue.Empty:
                name = None
            if timezone.now() >= next_resync:
                self.resync()
                next_resync = timezone.now() + dt.timedelta(seconds=RESYNC_SECONDS)
            if name is None:
                continue
            names = {name}
            while True:  # coalesce a burst of events into one judgement per app
                try:
                    names.add(self.dirty.get_nowait())
                except queue.Empty:
                    break
            for app_name in names:
                self.judge_safely(app_name)
            _heartbeat()

    def resync(self) -> None:
        names = set(
            App.objects.filter(deployments__status__in=[Status.BUILDING, Status.DEPLOYING, Status.LIVE]).values_list(
                "name", flat=True
            )
        )
        names |= set(App.objects.exclude(health_state=health.HealthState.NONE).values_list("name", flat=True))
        for name in names:
            self.judge_safely(name)
        _heartbeat()

    def judge_safely(self, app_name: str) -> None:
        try:
            self.judge(app_name)
        except ClusterError as e:
            log.warning("judging %s: %s", app_name, e.message)
            self.dirty.put(app_name) if not e.permanent else None
        except Exception:
            log.exception("judging %s failed", app_name)
        finally:
            close_old_connections()

    # -- judgement -----------------------------------------------------------------------------

    def judge(self, app_name: str) -> None:
        app = App.objects.filter(name=app_name).first()
        if app is None:
            return
        now = timezone.now()
        for deployment in app.deployments.filter(status=Status.BUILDING):
            self.judge_build(app, deployment)
        for deployment in app.deployments.filter(status=Status.DEPLOYING):
            self.judge_rollout(app, deployment, now)
        self.judge_health(app, now)

    def _app_objects(self, kind: str, app: App) -> list[Obj]:
        return [
            o for o in self.informers[kind].items() if _key(o)[0] == app.namespace and _labels(o).get(specs.LABEL_APP) == app.name
        ]

    def judge_build(self, app: App, deployment: Deployment) -> None:
        from builder import jobs as build_jobs

        job_name = build_jobs.build_job_name(app.name, deployment.number)
        job = self.informers["Job"].get(app.namespace, job_name)
        deleted = job is None and (app.namespace, job_name) in self.deleted_jobs
        pods = [
            p for p in self._app_objects("Pod", app) if (p.get("metadata") or {}).get("labels", {}).get("job-name") == job_name
        ]
        pod = max(pods, key=lambda p: p["metadata"].get("creationTimestamp", ""), default=None)
        if pod is not None:
            self._follow_build_logs(deployment, pod)
        verdict = judge_build(job, pod, job_deleted=deleted, now=timezone.now())
        if verdict is None:
            return
        if pod is not None:
            self._catch_up_logs(deployment, pod)
        if verdict.outcome == "live":
            self._built(deployment, verdict)
        else:
            message = verdict.message or self._build_failure_message(deployment, pod, verdict)
            logs.append(deployment, LogLine.Step.SYSTEM, f"Failed: {message}")
            if transition(deployment, to=Status.FAILED, error=message, expect={Status.BUILDING}) and message.startswith(
                "build timed out"
            ):
                tasks.cleanup_deployment.delay(deployment.pk)  # the Job may still be running: stop it

    def _built(self, deployment: Deployment, verdict: Verdict) -> None:
        from builder import jobs as build_jobs

        try:
            result = build_jobs.parse_termination_message(verdict.message)
        except build_jobs.BuildJobError as e:
            message = f"push failed: {e}"
            logs.append(deployment, LogLine.Step.SYSTEM, f"Failed: {message}")
            transition(deployment, to=Status.FAILED, error=message, expect={Status.BUILDING})
            return
        logs.append(deployment, LogLine.Step.PUSH, f"Pushed {result.image}.")
        if transition(
            deployment, to=Status.DEPLOYING, reason=f"built {result.image}", image=result.image, expect={Status.BUILDING}
        ):
            tasks.apply_deployment.delay(deployment.pk)

    def _build_failure_message(self, deployment: Deployment, pod: Obj | None, verdict: Verdict) -> str:
        from builder import jobs as build_jobs

        state: Mapping[str, Any] = {}
        for cs in _container_statuses(pod or {}):
            if cs.get("name") == verdict.container:
                state = (cs.get("state") or {}).get("terminated") or {}
        steps = _steps_of(verdict.container if verdict.container in ("clone", "plan") else "build")
        tail = reversed(
            LogLine.objects.filter(deployment=deployment, step__in=steps).order_by("-seq").values_list("text", flat=True)[:40]
        )
        return build_jobs.classify_build_failure(
            verdict.container,
            state.get("exitCode", 1),
            "\n".join(tail),
            state.get("message", ""),
            reason=state.get("reason"),
            registry=settings.REGISTRY,
        )

    def _follow_build_logs(self, deployment: Deployment, pod: Obj) -> None:
        namespace, name = _key(pod)
        for cs in _container_statuses(pod):
            if (cs.get("state") or {}).get("running"):
                self.logs.follow(deployment.pk, namespace, name, cs["name"])

    def _catch_up_logs(self, deployment: Deployment, pod: Obj) -> None:
        namespace, name = _key(pod)
        for cs in _container_statuses(pod):
            state = cs.get("state") or {}
            if state.get("terminated") or state.get("running"):
                try:
                    self.logs.copy(deployment.pk, namespace, name, cs["name"])
                except ClusterError as e:
                    log.info("logs of %s/%s: %s", name, cs["name"], e.message)

    def judge_rollout(self, app: App, deployment: Deployment, now: dt.datetime) -> None:
        k8s_deployment = self.informers["Deployment"].get(app.namespace, app.name)
        verdict = judge_rollout(
            k8s_deployment,
            self._app_objects("ReplicaSet", app),
            self._app_objects("Pod", app),
            applied_generation=deployment.rollout_generation,
            now=now,
        )
        if verdict is None:
            return
        if verdict.outcome == "live":
            logs.append(deployment, LogLine.Step.ROLLOUT, f"Rollout complete: {verdict.message}.")
            transition(deployment, to=Status.LIVE, reason=verdict.message, expect={Status.DEPLOYING})
            return
        message = verdict.message
        if verdict.pod and verdict.container:
            message += self._crash_context(app, verdict)
        # The error is shown and streamed as it is: mask secret values the app may have printed.
        message = logs.scrub(message, secrets=logs.secret_values(deployment), max_chars=8000)
        logs.append(deployment, LogLine.Step.ROLLOUT, f"Rollout failed: {message}")
        failed = transition(deployment, to=Status.FAILED, error=message, expect={Status.DEPLOYING})
        if failed and app.deployments.filter(status=Status.LIVE).exists():
            tasks.restore_app.delay(app.pk)  # the previous version goes on serving, and nothing else

    def _crash_context(self, app: App, verdict: Verdict) -> str:
        """Return the last lines the crashed container printed, to store with the error."""
        for previous in (True, False):
            try:
                lines = list(self.kube.pod_log(app.namespace, verdict.pod, verdict.container, tail_lines=10, previous=previous))
            except ClusterError:
                continue
            if lines:
                return "\nLast log lines:\n" + "\n".join(lines[-10:])
        return ""

    def judge_health(self, app: App, now: dt.datetime) -> None:
        serving = app.deployments.filter(status=Status.LIVE).first()
        if serving is None:
            if app.health_state != health.HealthState.NONE:
                health_store.clear(app_id=app.pk, now=now)
            return
        pods = [
            p
            for p in self._app_objects("Pod", app)
            if _labels(p).get(specs.LABEL_COMPONENT) == specs.COMPONENT_APP
            and _labels(p).get(specs.LABEL_DEPLOYMENT) == str(serving.number)
        ]
        health_store.record(app_id=app.pk, health=health.classify(pods, serving=True, now=now), now=now)


def _heartbeat() -> None:
    try:
        from config import liveness
    except ImportError:
        return
    liveness.beat("controller")


def lead(kube: Cluster, *, identity: str, stop: threading.Event, elected: threading.Event, on_lost: Callable[[], None]) -> None:
    """Win the controller Lease (setting ``elected``) and renew it until ``stop``; call ``on_lost`` if it is taken away."""
    namespace = settings.CONTROLLER_NAMESPACE
    while not stop.is_set():
        _heartbeat()  # a standby is alive too, while it waits its turn
        try:
            kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
            if acquire(kube, namespace=namespace, identity=identity):
                elected.set()
                break
        except ClusterError as e:
            log.warning("taking the controller lease: %s", e.message)
        stop.wait(LEASE_SECONDS / 3)
    renewed = time.monotonic()
    while not stop.wait(LEASE_SECONDS / 3):
        try:
            if not acquire(kube, namespace=namespace, identity=identity):
                on_lost()
                return
            renewed = time.monotonic()
        except ClusterError as e:
            log.warning("renewing the controller lease: %s", e.message)
            if time.monotonic() - renewed > LEASE_SECONDS:
                # Another controller may hold it by now: stop acting rather than act twice.
                on_lost()
                return
    release(kube, namespace=namespace, identity=identity)


def release(kube: Cluster, *, namespace: str, identity: str) -> None:
    """Give the Lease up on a clean stop, so a standby takes over at once instead of after it expires."""
    try:
        lease = kube.get("Lease", LEASE_NAME, namespace)
        if lease and (lease.get("spec") or {}).get("holderIdentity") == identity:
            lease["spec"]["holderIdentity"] = None
            kube.replace(lease)
    except ClusterError as e:
        log.warning("releasing the controller lease: %s", e.message)


def acquire(kube: Cluster, *, namespace: str, identity: str) -> bool:
    now = timezone.now()
    lease = kube.get("Lease", LEASE_NAME, namespace)
    expired = True
    if lease is not None:
        spec = lease.get("spec") or {}
        renewed = spec.get("renewTime")
        if renewed:
            age = (now - dt.datetime.fromisoformat(renewed.replace("Z", "+00:00"))).total_seconds()
            expired = age > spec.get("leaseDurationSeconds", LEASE_SECONDS)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return kube.lease_acquire(
        namespace=namespace, name=LEASE_NAME, identity=identity, duration=LEASE_SECONDS, now=stamp, expired=expired
    )
