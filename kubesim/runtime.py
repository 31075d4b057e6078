"""Simulate the containers of one pod and compute the status a real kubelet would write."""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kubesim import behaviours as bh
from kubesim import hostrun
from kubesim.kubeapi import Kube, KubeError

log = logging.getLogger("kubesim.kubelet")

MAX_LOG_LINES = 10000
POLL_CAP = 5.0  # Longest sleep of a pod worker; changes arrive by notification anyway.


def iso(ts: float) -> str:
    """Format a wall-clock time as the API's RFC 3339 seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def iso_nano(ts: float) -> str:
    """Format a wall-clock time as the kubelet's fixed RFC 3339 nanoseconds, for log lines."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1e9):09d}Z"


def go_duration(seconds: float) -> str:
    """Format seconds as Go's time.Duration.String(), as in kubelet back-off messages."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:g}ms" if ms >= 1 else f"{seconds * 1e6:g}µs"
    total = round(seconds, 9)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    sec_text = f"{secs:.9f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{sec_text}"
    if minutes:
        return f"{int(minutes)}m{sec_text}"
    return sec_text


class LogBuffer:
    """The log of one container run; readers may follow it until the run ends."""

    def __init__(self) -> None:
        self.lines: deque[tuple[float, str, str]] = deque(maxlen=MAX_LOG_LINES)
        self.total = 0  # sequence number of the next line, so followers survive trimming
        self.closed = False
        self.cond = threading.Condition()

    def write(self, stream: str, text: str) -> None:
        with self.cond:
            self.lines.append((time.time(), stream, text))
            self.total += 1
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def snapshot(self) -> tuple[list[tuple[float, str, str]], int]:
        with self.cond:
            return list(self.lines), self.total

    def follow(self, seq: int, stop: Callable[[], bool]) -> Iterator[tuple[float, str, str]]:
        """Yield lines from sequence `seq` on, waiting for more until closed or stop()."""
        while True:
            with self.cond:
                while self.total <= seq and not self.closed and not stop():
                    self.cond.wait(timeout=1.0)
                if stop():
                    return
                first = self.total - len(self.lines)
                seq = max(seq, first)
                batch = list(self.lines)[seq - first :]
                seq = self.total
                done = self.closed
            yield from batch
            if done and not batch:
                return


class ConfigError(Exception):
    """A container's env refers to a missing Secret, ConfigMap or key."""


def _field_ref(pod: dict[str, Any], path: str) -> str:
    meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        return (meta.get(m.group(1)) or {}).get(m.group(2), "")
    return {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": status.get("hostIP", "127.0.0.1"),
        "status.podIP": status.get("podIP", ""),
        "status.podIPs": status.get("podIP", ""),
    }.get(path, "")


def resolve_env(kube: Kube, pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """Return the container's environment, raising ConfigError with the kubelet's own message."""
    ns = pod["metadata"]["namespace"]
    cache: dict[tuple[str, str], dict[str, str] | None] = {}

    def load(kind: str, name: str) -> dict[str, str] | None:
        if (kind, name) not in cache:
            path = f"/api/v1/namespaces/{ns}/{'secrets' if kind == 'Secret' else 'configmaps'}/"
            try:
                obj = kube.get(path + name)
            except KubeError as exc:
                if exc.status != 404:
                    raise
                cache[(kind, name)] = None
            else:
                if kind == "Secret":
                    cache[(kind, name)] = {
                        k: base64.b64decode(v).decode(errors="replace") for k, v in (obj.get("data") or {}).items()
                    }
                else:
                    cache[(kind, name)] = dict(obj.get("data") or {})
        return cache[(kind, name)]

    def missing_obj(kind: str, name: str) -> ConfigError:
        return ConfigError(f'{"secret" if kind == "Secret" else "configmap"} "{name}" not found')

    env: dict[str, str] = {}
    for src in container.get("envFrom") or []:
        prefix = src.get("prefix", "")
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if key in src:
                ref = src[key]
                data = load(kind, ref["name"])
                if data is None:
                    if ref.get("optional"):
                        continue
                    raise missing_obj(kind, ref["name"])
                env.update({prefix + k: v for k, v in data.items()})
    for item in container.get("env") or []:
        name = item["name"]
        if "valueFrom" not in item:
            env[name] = hostrun.expand(item.get("value") or "", env)
            continue
        vf = item["valueFrom"]
        for kind, key in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
            if key in vf:
                ref = vf[key]
                data = load(kind, ref["name"])
                if data is None:
                    if ref.get("optional"):
                        break
                    raise missing_obj(kind, ref["name"])
                if ref["key"] not in data:
                    if ref.get("optional"):
                        break
                    raise ConfigError(f"couldn't find key {ref['key']} in {kind} {ns}/{ref['name']}")
                env[name] = data[ref["key"]]
                break
        else:
            if "fieldRef" in vf:
                env[name] = _field_ref(pod, vf["fieldRef"]["fieldPath"])
            elif "resourceFieldRef" in vf:
                res = vf["resourceFieldRef"]["resource"]
                limits = (container.get("resources") or {}).get("limits") or {}
                env[name] = str(limits.get(res.split(".", 1)[-1], "8" if "cpu" in res else "34359738368"))
    return env


def _image_id(image: str) -> str:
    repo = image.split("@", 1)[0]
    last = repo.rsplit("/", 1)[-1]
    if ":" in last:
        repo = repo[: repo.rfind(":")]
    if "/" not in repo:
        repo = f"docker.io/library/{repo}"
    elif "." not in repo.split("/", 1)[0] and ":" not in repo.split("/", 1)[0]:
        repo = f"docker.io/{repo}"
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def _normalised(image: str) -> str:
    return _image_id(image).split("@", 1)[0] + (":" + image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ":latest")


_STARTING = {"pull_error", "invalid_image", "config_error", "create_error", "run_error"}


class ContainerSim:
    """One container of a pod: its runs, restarts, back-off and the status they produce."""

    def __init__(self, worker: PodWorker, spec: dict[str, Any], init: bool) -> None:
        self.w = worker
        self.spec = spec
        self.name: str = spec["name"]
        self.image: str = spec.get("image", "")
        self.init = init
        self.mode = "blocked"
        self.next_at: float | None = None
        self.behaviour: bh.Behaviour | None = None
        self.restart_count = 0
        self.backoff_count = 0
        self.pull_count = 0
        self.state: dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
        self.last_state: dict[str, Any] = {}
        self.ready = False
        self.started = False
        self.container_id = ""
        self.ever_ran = False
        self.ready_at: float | None = None
        self.exit_at: float | None = None
        self.exit_spec: tuple[int, str, str] = (0, "Completed", "")
        self.next_log_at: float | None = None
        self.log_n = 0
        self.first_started: float | None = None
        self.run_started_wall = 0.0
        self.current: LogBuffer | None = None
        self.previous: LogBuffer | None = None
        self.process: hostrun.HostProcess | None = None
        self.process_exit: int | None = None
        self.run_dir: Path | None = None
        self.env: dict[str, str] = {}

    # ----- helpers ---------------------------------------------------------------------------
    @property
    def scale(self) -> float:
        return self.w.scale

    def _param(self, key: str, default: Any = None) -> Any:
        return self.behaviour.get(key, default) if self.behaviour else default

    def _wait(self, reason: str, message: str = "") -> None:
        self.state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        self.ready = False
        self.started = False

    def waiting_reason(self) -> str:
        return self.state.get("waiting", {}).get("reason", "ContainerCreating")

    def unblock(self, now: float) -> None:
        """Allow the first start, after the ContainerCreating delay."""
        if self.mode != "blocked":
            return
        self.behaviour = self.w.resolve(self)
        self.mode = "creating"
        self._wait("ContainerCreating")
        self.next_at = now + float(self._param("start_delay", 0.5)) * self.scale

    def rules_changed(self, now: float) -> None:
        """Apply a changed behaviour: at once where a real container would notice, else later."""
        if self.mode in ("blocked", "done"):
            return
        new = self.w.resolve(self)
        if self.behaviour and new.key() == self.behaviour.key():
            return
        old, self.behaviour = self.behaviour, new
        if self.mode in ("waiting_err", "pull_err", "pull_backoff"):
            self.next_at = now
        elif self.mode == "running" and self.process is None and new.type not in _STARTING | {"host_run"}:
            self._plan_run(now, fresh=False)
        elif self.mode == "running":
            self.behaviour = old  # keeps running as it is; the new behaviour applies on restart

    # ----- transitions -----------------------------------------------------------------------
    def advance(self, now: float) -> float | None:
        """Apply every transition due by `now`; return when the next one is due."""
        for _ in range(100):
            due = self._next_due()
            if due is None or due > now:
                return due
            self._fire(now)
        return now + 0.05

    def _next_due(self) -> float | None:
        if self.mode == "running":
            times = [t for t in (self.ready_at, self.exit_at, self.next_log_at) if t is not None]
            if self.process_exit is not None:
                times.append(0.0)
            return min(times) if times else None
        if self.mode in ("blocked", "done"):
            return None
        return self.next_at

    def _fire(self, now: float) -> None:
        if self.mode == "running":
            if self.process_exit is not None:
                code = self.process_exit
                self.process_exit = None
                msg = hostrun.read_termination_message(self.run_dir) if self.run_dir else ""
                if not msg and code != 0 and self.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
                    lines, _ = self.current.snapshot() if self.current else ([], 0)
                    msg = "\n".join(t for _, _, t in lines[-80:])[-2048:]
                self._terminate(now, code, "", msg or self._param("message", "") or "")
                return
            if self.ready_at is not None and self.ready_at <= now:
                self.ready_at = None
                self.ready = True
                return
            if self.next_log_at is not None and self.next_log_at <= now:
                self.log_n += 1
                template = str(self._param("log_line", "{container}: tick {n}"))
                try:
                    line = template.format(container=self.name, n=self.log_n, pod=self.w.name)
                except (KeyError, IndexError, ValueError):
                    line = template  # a typo in a rule prints the template rather than stop the pod
                self._log(line)
                self.next_log_at = now + float(self._param("log_every")) * self.scale
                return
            if self.exit_at is not None and self.exit_at <= now:
                code, reason, message = self.exit_spec
                if reason != "Completed" and self._param("log_lines") is None:
                    self._log(f"{self.name}: exiting with code {code}", "stderr")
                self._terminate(now, code, reason, message)
                return
            return
        self.next_at = None
        if self.mode in ("creating", "waiting_err", "pull_backoff", "restart"):
            self._try_start(now)
        elif self.mode == "pull_err":
            delay = min(
                float(self._param("backoff", 10)) * 2 ** max(self.pull_count - 1, 0), float(self._param("max_backoff", 300))
            )
            self.mode = "pull_backoff"
            self._wait("ImagePullBackOff", f'Back-off pulling image "{self.image}"')
            self._event("BackOff", f'Back-off pulling image "{self.image}"')
            self._event("Failed", "Error: ImagePullBackOff", warning=True)
            self.next_at = now + delay * self.scale
        elif self.mode == "start_err":
            self._schedule_restart(now)

    def _try_start(self, now: float) -> None:
        b = self.behaviour = self.w.resolve(self)
        try:
            self.env = resolve_env(self.w.kube, self.w.pod, self.spec)
        except ConfigError as exc:
            self.mode = "waiting_err"
            self._wait("CreateContainerConfigError", str(exc))
            self._event("Failed", f"Error: {exc}", warning=True)
            self.next_at = now + 2.0 * self.scale
            return
        except KubeError as exc:
            log.warning("%s: env lookup failed: %s", self.w.name, exc)
            self.mode = "waiting_err"
            self.next_at = now + 1.0 * self.scale
            return
        image = self.image
        if b.type == "pull_error":
            self.pull_count += 1
            msg = b["message"] or (
                f"rpc error: code = Unknown desc = failed to pull and unpack image "
                f'"{_normalised(image)}": failed to resolve reference "{_normalised(image)}": '
                f"{_normalised(image)}: not found"
            )
            self.mode = "pull_err"
            self._wait("ErrImagePull", msg)
            self._event("Pulling", f'Pulling image "{image}"')
            self._event("Failed", f'Failed to pull image "{image}": {msg}', warning=True)
            self._event("Failed", "Error: ErrImagePull", warning=True)
            self.next_at = now + float(b["err_for"]) * self.scale
            return
        if b.type == "invalid_image":
            msg = b["message"] or (
                f'Failed to apply default image tag "{image}": couldn\'t parse '
                f'image reference "{image}": invalid reference format'
            )
            self.mode = "waiting_err"
            self._wait("InvalidImageName", msg)
            self._event("InspectFailed", msg, warning=True)
            self._event("Failed", "Error: InvalidImageName", warning=True)
            self.next_at = now + 10.0 * self.scale
            return
        if b.type in ("config_error", "create_error"):
            if b.type == "config_error":
                reason, default = "CreateContainerConfigError", self._config_error_message()
            else:
                reason, default = "CreateContainerError", ("failed to reserve container name: name is reserved")
            self.mode = "waiting_err"
            self._wait(reason, b["message"] or default)
            self._event("Failed", f"Error: {b['message'] or default}", warning=True)
            self.next_at = now + float(b["retry"]) * self.scale
            return
        if b.type == "run_error":
            msg = b["message"] or (
                "failed to create containerd task: failed to create shim task: OCI runtime "
                "create failed: runc create failed: unable to start container process: exec: "
                f'"{(self.spec.get("command") or ["app"])[0]}": executable file not found in '
                "$PATH: unknown"
            )
            if self.ever_ran or self.container_id:
                self.restart_count += 1
            self.container_id = "containerd://" + uuid.uuid4().hex + uuid.uuid4().hex
            fin = iso(time.time())
            self.last_state = {
                "terminated": {
                    "exitCode": 128,
                    "reason": "StartError",
                    "message": msg,
                    "startedAt": "1970-01-01T00:00:00Z",
                    "finishedAt": fin,
                    "containerID": self.container_id,
                }
            }
            self.mode = "start_err"
            self._wait("RunContainerError", msg)
            self._event("Failed", f"Error: {msg}", warning=True)
            self.next_at = now + 1.0 * self.scale
            return
        if b.type == "host_run":
            try:
                self.w.sandbox.prepare()
            except hostrun.VolumeNotReady as exc:
                log.info("%s: volume not ready: %s", self.w.name, exc)
                self.mode = "waiting_err"
                self._wait("ContainerCreating")
                self.next_at = now + 1.0 * self.scale
                return
        self._start_run(now)

    def _event(self, reason: str, message: str, *, warning: bool = False) -> None:
        self.w.event(reason, message, container=self.name, init=self.init, warning=warning)

    def _config_error_message(self) -> str:
        for item in self.spec.get("env") or []:
            ref = (item.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                return f'secret "{ref["name"]}" not found'
        return 'secret "app-secrets" not found'

    def _start_run(self, now: float) -> None:
        if self.ever_ran:
            self.restart_count += 1
            if "terminated" in self.state:
                self.last_state = {"terminated": self.state["terminated"]}
            elif self.last_state.get("terminated"):
                pass  # waiting in back-off: lastState already holds the last termination
        self.ever_ran = True
        self.previous = self.current
        self.current = LogBuffer()
        self.container_id = "containerd://" + uuid.uuid4().hex + uuid.uuid4().hex
        self.run_started_wall = time.time()
        if self.first_started is None:
            self.first_started = now
        self.mode = "running"
        self.state = {"running": {"startedAt": iso(self.run_started_wall)}}
        if self.restart_count == 0:
            self._event("Pulled", f'Container image "{self.image}" already present on machine')
        self._event("Created", f"Created container {self.name}")
        self._event("Started", f"Started container {self.name}")
        self.started = True
        self.ready = False
        self._plan_run(now, fresh=True)

    def _default_ready_after(self) -> float:
        probe = self.spec.get("readinessProbe")
        return float(probe.get("initialDelaySeconds", 0)) if probe else 0.0

    def _plan_run(self, now: float, fresh: bool) -> None:
        """Set the ready, exit and log timers of the current run from the behaviour."""
        b = self.behaviour
        assert b is not None
        s = self.scale
        ready_after = b.get("ready_after")
        ready_after = self._default_ready_after() if ready_after is None else float(ready_after)
        self.exit_at = None
        self.ready_at = None if self.ready else now + ready_after * s
        if b.type == "never_ready" or self.init:
            # Init containers never report ready while running; they only complete.
            self.ready_at = None
            self.ready = False
            if b.type == "never_ready" and self.spec.get("readinessProbe"):
                self._event("Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 503", warning=True)
        every = float(b.get("log_every") or 0)
        self.next_log_at = now + every * s if every > 0 else None
        if fresh:
            lines = b.get("log_lines")
            if lines is None:
                # A host_run container's log is only what its command prints.
                lines = [] if b.type == "host_run" else [f"{self.name}: started (image {self.image})"]
            for line in lines:
                self._log(self._subst(str(line)))
        if b.type in ("crash", "oom"):
            self.exit_at = now + float(b["after"]) * s
            self.exit_spec = (int(b["exit_code"]), str(b["reason"]), "")
            if b.get("ready_after") is None:
                # An app that dies at start-up fails its readiness probe first; being Ready for an
                # instant would count as progress for a Deployment and hide the crash loop.
                self.ready_at = None
        elif b.type == "flap":
            assert self.first_started is not None
            healthy_end = self.first_started + float(b["healthy_for"]) * s
            crash_end = healthy_end + float(b["crash_for"]) * s
            self.exit_spec = (int(b["exit_code"]), str(b["reason"]), "")
            if now < healthy_end:
                self.exit_at = healthy_end
            elif now < crash_end:
                self.exit_at = now + float(b["after"]) * s
                self.ready_at = None
                self.ready = False
            else:
                self.backoff_count = 0  # a long healthy run resets the kubelet's back-off
        elif b.type == "exit":
            self.exit_at = now + float(b["duration"]) * s
            code = int(b["exit_code"])
            self.exit_spec = (code, "Completed" if code == 0 else "Error", self._subst(str(b["message"] or "")))
        elif b.type == "host_run" and fresh:
            try:
                self._spawn_host(now)
            except OSError as exc:
                self._log(f"kubesim: cannot run on the host: {exc}", "stderr")
                self.process_exit = 128

    def _subst(self, text: str) -> str:
        if "{" not in text:
            return text
        literal = {i["name"]: i.get("value") or "" for i in self.spec.get("env") or [] if "value" in i}
        text = text.replace("{digest}", bh.fake_digest(self.image, literal))
        return re.sub(r"\{env:([A-Za-z_][A-Za-z0-9_.-]*)\}", lambda m: self.env.get(m.group(1), ""), text)

    def _spawn_host(self, now: float) -> None:
        sb = self.w.sandbox
        self.run_dir = sb.root / "runs" / f"{self.name}-{self.restart_count}"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        mounts = sb.mounts(self.spec, self.run_dir)
        argv = hostrun.host_argv(self.spec, self.behaviour.get("script") if self.behaviour else None, self.env, mounts)
        env = hostrun.host_env(self.env, mounts, self.w.name, sb.root / "home")
        (sb.root / "home").mkdir(parents=True, exist_ok=True)
        cwd = hostrun.host_cwd(self.spec, mounts, sb.root)
        buf = self.current

        def on_line(stream: str, text: str) -> None:
            if buf is not None:
                buf.write(stream, text)

        def on_exit(code: int) -> None:
            with self.w.lock:
                if self.process is proc:
                    self.process_exit = code
            self.w.kick()

        proc = hostrun.HostProcess(argv, env, cwd, on_line, on_exit)
        self.process = proc
        timeout = self.behaviour.get("timeout") if self.behaviour else None
        if timeout:
            self.exit_at = now + float(timeout) * self.scale
            self.exit_spec = (137, "Error", "kubesim: host_run timed out")
        proc.start()

    def _log(self, text: str, stream: str = "stdout") -> None:
        if self.current is not None:
            self.current.write(stream, text)

    def _terminate(self, now: float, code: int, reason: str, message: str) -> None:
        if self.process is not None:
            proc, self.process = self.process, None
            threading.Thread(target=proc.kill, args=(1.0,), daemon=True).start()
        reason = reason or ("Completed" if code == 0 else "Error")
        term: dict[str, Any] = {
            "exitCode": code,
            "reason": reason,
            "startedAt": iso(self.run_started_wall),
            "finishedAt": iso(time.time()),
            "containerID": self.container_id,
        }
        if message:
            term["message"] = message
        self.state = {"terminated": term}
        self.ready = False
        self.started = False
        self.ready_at = self.exit_at = self.next_log_at = None
        if self.current is not None:
            self.current.close()
        policy = self.w.restart_policy
        # Init containers only restart after a failure; main ones as restartPolicy says.
        restart = (
            (code != 0 and policy != "Never") if self.init else (policy == "Always" or (policy == "OnFailure" and code != 0))
        )
        if not restart:
            self.mode = "done"
            return
        self._schedule_restart(now)

    def _schedule_restart(self, now: float) -> None:
        """Restart at once the first time, then after a doubling back-off, as the kubelet does."""
        if "terminated" in self.state:
            self.last_state = {"terminated": self.state["terminated"]}
        if self.backoff_count == 0:
            self.backoff_count = 1
            self.mode = "restart"
            self.next_at = now + float(self._param("restart_delay", 1.0)) * self.scale
            return
        base = float(self._param("backoff", 10.0))
        cap = float(self._param("max_backoff", 300.0))
        delay = min(base * 2 ** (self.backoff_count - 1), cap)
        self.backoff_count += 1
        self.mode = "restart"
        meta = self.w.pod["metadata"]
        self._event("BackOff", "Back-off restarting failed container", warning=True)
        self._wait(
            "CrashLoopBackOff",
            f"back-off {go_duration(delay)} restarting failed container={self.name} "
            f"pod={meta['name']}_{meta['namespace']}({meta['uid']})",
        )
        self.next_at = now + delay * self.scale

    def stop(self) -> None:
        """Kill a host process and end followers of the log."""
        if self.process is not None:
            proc, self.process = self.process, None
            proc.kill(1.0)
        if self.current is not None:
            self.current.close()

    # ----- status ----------------------------------------------------------------------------
    def succeeded(self) -> bool:
        return self.mode == "done" and self.state.get("terminated", {}).get("exitCode") == 0

    def status(self) -> dict[str, Any]:
        st: dict[str, Any] = {
            "name": self.name,
            "state": self.state,
            "lastState": self.last_state,
            "ready": self.ready,
            "restartCount": self.restart_count,
            "image": self.image,
            "imageID": _image_id(self.image) if self.ever_ran else "",
            "started": self.started,
        }
        if self.container_id:
            st["containerID"] = self.container_id
        return st


class PodWorker:
    """Run one pod on a simulated node: a thread that advances its containers and writes status."""

    def __init__(self, kubelet: Any, pod: dict[str, Any], pod_ip: str) -> None:
        self.kubelet = kubelet
        self.kube: Kube = kubelet.kube
        self.pod = pod
        meta = pod["metadata"]
        self.uid: str = meta["uid"]
        self.name: str = meta["name"]
        self.namespace: str = meta["namespace"]
        spec = pod.get("spec", {})
        self.restart_policy: str = spec.get("restartPolicy", "Always")
        self.scale = bh.time_scale()
        self.pod_ip = "127.0.0.1" if spec.get("hostNetwork") else pod_ip
        self.lock = threading.RLock()
        self._event = threading.Event()
        self.stopped = False
        self.inits = [ContainerSim(self, c, True) for c in spec.get("initContainers") or []]
        self.mains = [ContainerSim(self, c, False) for c in spec.get("containers") or []]
        default_wait = "PodInitializing" if self.inits else "ContainerCreating"
        for c in self.inits + self.mains:
            c._wait(default_wait)
        self.start_wall = time.time()
        self.start_mono = time.monotonic()
        self.transitions: dict[str, tuple[str, str]] = {}
        self.last_written: dict[str, Any] | None = None
        self.terminal = False
        self.deadline_failed = False
        self.sandbox = hostrun.PodSandbox(kubelet.pods_dir, pod, self.kube)
        self.thread = threading.Thread(target=self._run, name=f"pod-{self.name}", daemon=True)

    # ----- outside events --------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def event(self, reason: str, message: str, *, container: str = "", init: bool = False, warning: bool = False) -> None:
        """Record a kubelet event about this pod (sent in the background)."""
        recorder = getattr(self.kubelet, "events", None)
        if recorder is not None:
            field = f"spec.{'initContainers' if init else 'containers'}{{{container}}}" if container else ""
            recorder.record(self.pod, reason, message, field_path=field, warning=warning)

    def kick(self) -> None:
        self._event.set()

    def update(self, pod: dict[str, Any]) -> None:
        with self.lock:
            self.pod = pod
        self.kick()

    def rules_changed(self) -> None:
        with self.lock:
            now = time.monotonic()
            for c in self.inits + self.mains:
                c.rules_changed(now)
        self.kick()

    def resolve(self, c: ContainerSim) -> bh.Behaviour:
        return bh.resolve(self.kubelet.rules(), self.pod, c.spec, c.init)

    def container(self, name: str) -> ContainerSim | None:
        return next((c for c in self.inits + self.mains if c.name == name), None)

    def stop(self) -> None:
        self.stopped = True
        self.kick()

    # ----- the loop --------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self.stopped:
                if self.pod["metadata"].get("deletionTimestamp"):
                    self._finish_deletion()
                    return
                with self.lock:
                    now = time.monotonic()
                    wake = self._step(now)
                    status = self._compose()
                if status != self.last_written and not self._write(status):
                    wake = min(wake or now + 1, now + 1)
                if self.terminal and status == self.last_written:
                    self._release()
                    wake = None
                timeout = POLL_CAP if wake is None else min(max(wake - time.monotonic(), 0.0), POLL_CAP)
                self._event.wait(timeout)
                self._event.clear()
        except Exception:  # A broken pod must not take the kubelet down; log it loudly.
            log.exception("pod worker %s/%s crashed", self.namespace, self.name)
        finally:
            self._release()

    def _release(self) -> None:
        for c in self.inits + self.mains:
            c.stop()

    def _step(self, now: float) -> float | None:
        if self.terminal:
            return None
        deadline = self.pod.get("spec", {}).get("activeDeadlineSeconds")
        if deadline is not None and now - self.start_mono >= float(deadline):
            self.deadline_failed = True
            self.terminal = True
            for c in self.inits + self.mains:
                if c.mode == "running":
                    c._terminate(now, 137, "Error", "")
                c.mode = "done"
            return None
        wakes: list[float] = []
        # Loop because a container that finishes at once can unblock the next one in this step.
        for _ in range(len(self.inits) + 2):
            progressed = False
            for i, c in enumerate(self.inits):
                if c.mode == "blocked" and all(p.succeeded() for p in self.inits[:i]):
                    c.unblock(now)
                    progressed = True
            if all(c.succeeded() for c in self.inits):
                for c in self.mains:
                    if c.mode == "blocked":
                        c.unblock(now)
                        progressed = True
            wakes = [d for c in self.inits + self.mains if (d := c.advance(now)) is not None]
            if not progressed:
                break
        return min(wakes) if wakes else None

    def _phase(self) -> str:
        """Port of the kubelet's getPhase (pkg/kubelet/kubelet_pods.go, v1.20)."""
        if self.deadline_failed:
            return "Failed"
        pending_init = failed_init = 0
        for c in self.inits:
            st = c.state
            if "running" in st:
                pending_init += 1
            elif "terminated" in st:
                if st["terminated"]["exitCode"] != 0:
                    failed_init += 1
            elif c.last_state.get("terminated"):
                if c.last_state["terminated"]["exitCode"] != 0:
                    failed_init += 1
            else:
                pending_init += 1
        running = waiting = stopped = succeeded = 0
        for c in self.mains:
            st = c.state
            if "running" in st:
                running += 1
            elif "terminated" in st:
                stopped += 1
                if st["terminated"]["exitCode"] == 0:
                    succeeded += 1
            elif c.last_state.get("terminated"):
                stopped += 1
            else:
                waiting += 1
        policy = self.restart_policy
        if failed_init > 0 and policy == "Never":
            return "Failed"
        if pending_init > 0 or waiting > 0:
            return "Pending"
        if running > 0:
            return "Running"
        if stopped > 0:
            if policy == "Always":
                return "Running"
            if stopped == succeeded:
                return "Succeeded"
            if policy == "Never":
                return "Failed"
            return "Running"
        return "Pending"

    def _condition(self, ctype: str, ok: bool, reason: str = "", message: str = "") -> dict[str, Any]:
        status = "True" if ok else "False"
        prev = self.transitions.get(ctype)
        if prev is None or prev[0] != status:
            self.transitions[ctype] = (status, iso(time.time()))
        cond: dict[str, Any] = {
            "type": ctype,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": self.transitions[ctype][1],
        }
        if not ok and reason:
            cond["reason"] = reason
            if message:
                cond["message"] = message
        return cond

    def _compose(self) -> dict[str, Any]:
        phase = self._phase()
        if phase in ("Succeeded", "Failed"):
            self.terminal = True
        not_init = [c.name for c in self.inits if not c.succeeded()]
        unready = [c.name for c in self.mains if not c.ready]
        completed = phase == "Succeeded"
        ready_reason = "PodCompleted" if completed else "ContainersNotReady"
        ready_msg = "" if completed else f"containers with unready status: [{' '.join(unready)}]"
        conds = [
            self._condition(
                "Initialized",
                not not_init,
                "ContainersNotInitialized",
                f"containers with incomplete status: [{' '.join(not_init)}]",
            ),
            self._condition("Ready", not unready and not completed, ready_reason, ready_msg),
            self._condition("ContainersReady", not unready and not completed, ready_reason, ready_msg),
        ]
        if completed:
            conds[0]["reason"] = "PodCompleted"
        scheduled = next((c for c in self.pod.get("status", {}).get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        conds.append(
            scheduled
            or {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": iso(self.start_wall)}
        )
        status: dict[str, Any] = {
            "phase": phase,
            "conditions": conds,
            "hostIP": "127.0.0.1",
            "podIP": self.pod_ip,
            "podIPs": [{"ip": self.pod_ip}],
            "startTime": iso(self.start_wall),
            "containerStatuses": [c.status() for c in self.mains],
        }
        if self.inits:
            status["initContainerStatuses"] = [c.status() for c in self.inits]
        if self.deadline_failed:
            status["reason"] = "DeadlineExceeded"
            status["message"] = "Pod was active on the node longer than the specified deadline"
        return status

    def _write(self, status: dict[str, Any]) -> bool:
        try:
            self.kube.request(
                "PATCH",
                f"/api/v1/namespaces/{self.namespace}/pods/{self.name}/status",
                body={"metadata": {"uid": self.uid}, "status": status},
                content_type="application/merge-patch+json",
            )
        except KubeError as exc:
            if exc.status in (404, 409, 410):
                self.stopped = True  # gone, or replaced by a pod of the same name
                return False
            log.warning("%s/%s: status write failed: %s", self.namespace, self.name, exc)
            return False
        self.last_written = status
        return True

    def _finish_deletion(self) -> None:
        """Stop the containers and remove the pod for good, as the kubelet does after a delete."""
        for c in self.inits + self.mains:
            if c.mode == "running":
                c._event("Killing", f"Stopping container {c.name}")
            c.stop()
        for _ in range(20):
            try:
                self.kube.request(
                    "DELETE",
                    f"/api/v1/namespaces/{self.namespace}/pods/{self.name}",
                    body={
                        "kind": "DeleteOptions",
                        "apiVersion": "v1",
                        "gracePeriodSeconds": 0,
                        "preconditions": {"uid": self.uid},
                    },
                )
                break
            except KubeError as exc:
                if exc.status in (404, 409):
                    break
                log.warning("%s/%s: final delete failed: %s", self.namespace, self.name, exc)
                time.sleep(0.5)
        self.sandbox.cleanup()
        self.stopped = True
