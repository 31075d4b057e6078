"""The end-to-end stack: Slipway's real processes against the local cluster and the test database.

``slipway_stack`` starts, once per test session, a real Celery worker, the controller
and the web (gunicorn with uvicorn workers) on loopback, all reading the test
database the test itself writes (tests using it take ``transactional_db``), and the
local Kubernetes control plane with simulated nodes. App names must be unique per
test (``unique_name``): the cluster outlives each test's database.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from kubesim.wait import WaitTimeout, wait_for

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unique_name(prefix: str = "app") -> str:
    """Return an app name no earlier test used on this cluster."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def wait_until(predicate: Callable[[], object], *, timeout: float, message: str, interval: float = 0.2) -> object:
    """Return the predicate's first truthy value, or fail the test when the deadline passes."""
    try:
        return wait_for(predicate, timeout=timeout, interval=interval, message=message)
    except WaitTimeout as e:
        pytest.fail(str(e))


def database_url() -> str:
    """Return a URL for the test database the current process uses."""
    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


@dataclass
class Process:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log = self.log_path.open("ab")
        self.popen = subprocess.Popen(
            self.argv, cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        if not self.alive():
            return
        assert self.popen is not None
        os.killpg(self.popen.pid, sig)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)

    def kill(self) -> None:
        """Kill it the hard way, as a crash or an OOM would."""
        self.stop(signal.SIGKILL)

    def wait_for_output(self, text: str, *, timeout: float, since: int = 0) -> None:
        wait_until(
            lambda: text in self.output()[since:] or not self.alive(), timeout=timeout, message=f"{self.name} to say {text!r}"
        )
        if not self.alive():
            pytest.fail(f"{self.name} exited:\n{self.output()[-3000:]}")


@dataclass
class Stack:
    url: str
    kubeconfig: str
    env: dict[str, str]
    processes: dict[str, Process] = field(default_factory=dict)

    def restart(self, name: str, *, kill: bool = False) -> None:
        """Stop a process (SIGKILL when ``kill``) and start it again, waiting until it is ready."""
        process = self.processes[name]
        process.kill() if kill else process.stop()
        mark = len(process.output())
        process.start()
        process.wait_for_output(READY[name], timeout=60, since=mark)

    def logs(self) -> str:
        return "\n".join(f"==== {n} ====\n{p.output()[-4000:]}" for n, p in self.processes.items())


READY = {"worker": "ready.", "controller": "caches synced", "web": "Application startup complete"}


def _commands(port: int, state_dir: Path) -> dict[str, list[str]]:
    from config import processes

    everything = processes.commands(bind=f"127.0.0.1:{port}", state_dir=state_dir, web_workers=1)
    # Beat is left out: tests run the reconciler themselves, when they mean to.
    return {name: everything[name] for name in ("worker", "controller", "web")}


@pytest.fixture(scope="session")
def _stack_processes(kube_cluster, django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Stack]:
    """Start the worker, controller and web once for the session, against the test database."""
    from django.conf import settings

    with django_db_blocker.unblock():
        url = database_url()
    port = free_port()
    logdir = tmp_path_factory.mktemp("stack")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": url,
        "KUBECONFIG": str(kube_cluster.kubeconfig),
        "SLIPWAY_KUBE_SIMULATED": "true",
        "SLIPWAY_CELERY_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
        "SLIPWAY_STATE_DIR": str(settings.STATE_DIR),
        "SLIPWAY_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "SLIPWAY_PROGRESS_DEADLINE_SECONDS": os.environ.get("SLIPWAY_PROGRESS_DEADLINE_SECONDS", "20"),
        "SLIPWAY_TASK_MAX_RETRIES": "2",
        # Short enough that a test can watch a build run out of time.
        "SLIPWAY_BUILD_DEADLINE_SECONDS": os.environ.get("SLIPWAY_BUILD_DEADLINE_SECONDS", "25"),
        "PYTHONUNBUFFERED": "1",
    }
    stack = Stack(url=f"http://127.0.0.1:{port}", kubeconfig=str(kube_cluster.kubeconfig), env=env)
    for name, argv in _commands(port, settings.STATE_DIR).items():
        stack.processes[name] = Process(name, argv, env, logdir / f"{name}.log")
        stack.processes[name].start()
    try:
        for name, process in stack.processes.items():
            process.wait_for_output(READY[name], timeout=90)
        yield stack
    finally:
        for process in stack.processes.values():
            process.stop()


@pytest.fixture
def slipway_stack(_stack_processes: Stack, transactional_db, settings) -> Iterator[Stack]:
    """Give a test the running stack; this process talks to the same cluster and database."""
    from apps.deployments import pipeline

    settings.KUBECONFIG = _stack_processes.kubeconfig
    settings.KUBE_SIMULATED = True
    pipeline.cluster.cache_clear()
    for name, process in _stack_processes.processes.items():
        if not process.alive():
            process.start()
            process.wait_for_output(READY[name], timeout=60)
    yield _stack_processes
    pipeline.cluster.cache_clear()


@dataclass
class LiveWeb:
    """Slipway's web process alone (gunicorn with uvicorn workers), for tests of pages, the API and streams.

    No worker, controller or cluster: tasks the web enqueues go to this run's own queue,
    which nothing consumes, so the states a test sets stay as it set them.
    """

    url: str
    process: Process

    def start(self) -> None:
        self.process.start()

        def answers() -> bool:
            if not self.process.alive():
                pytest.fail(f"the web process exited:\n{self.output()[-3000:]}")
            try:
                return requests.get(self.url + "/healthz", timeout=2).status_code == 200
            except requests.RequestException:
                return False  # not listening yet, or still booting

        wait_until(answers, timeout=60, message="the web process to answer /healthz", interval=0.1)

    def ensure_running(self) -> None:
        if not self.process.alive():
            self.start()

    def stop(self) -> None:
        self.process.stop()

    def output(self) -> str:
        return self.process.output()


@contextmanager
def start_live_web(django_db_blocker, logdir: Path, *, env: dict[str, str] | None = None) -> Iterator[LiveWeb]:
    """Start the web process against the test database; stop it afterwards."""
    from django.conf import settings

    from config import processes

    with django_db_blocker.unblock():
        url = database_url()
    port = free_port()
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": url,
        "SLIPWAY_CELERY_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
        "SLIPWAY_STATE_DIR": str(settings.STATE_DIR),
        "SLIPWAY_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    argv = processes.commands(bind=f"127.0.0.1:{port}", state_dir=settings.STATE_DIR, web_workers=1)["web"]
    web = LiveWeb(url=f"http://127.0.0.1:{port}", process=Process("web", argv, environment, logdir / "web.log"))
    web.start()
    try:
        yield web
    finally:
        web.stop()
