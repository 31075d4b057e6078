"""Slipway's web process alone (gunicorn with uvicorn workers) on loopback, against the test database.

Lighter than the whole stack in tests/support/live.py: no worker, controller or
cluster, for tests of the API and its streams over real HTTP. Tasks the web enqueues
go to this test run's own queue, which nothing consumes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def database_url() -> str:
    """Return a URL for the test database this process uses."""
    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


@dataclass
class LiveWeb:
    url: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                self.argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"the web process exited:\n{self.output()[-3000:]}")
            try:
                if requests.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except (requests.ConnectionError, requests.Timeout):  # not listening yet, or still booting
                pass
            time.sleep(0.1)  # polling for readiness, bounded by the deadline
        raise RuntimeError(f"the web process did not answer within 60 s:\n{self.output()[-3000:]}")

    def ensure_running(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            self.start()

    def stop(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextmanager
def start_live_web(django_db_blocker, logdir: Path) -> Iterator[LiveWeb]:
    from django.conf import settings

    with django_db_blocker.unblock():
        url = database_url()
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": url,
        "SLIPWAY_CELERY_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
        "SLIPWAY_STATE_DIR": str(settings.STATE_DIR),
        "SLIPWAY_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "PYTHONUNBUFFERED": "1",
    }
    argv = [sys.executable, "-m", "gunicorn", "config.asgi:application", "-k", "uvicorn.workers.UvicornWorker",
            "--bind", f"127.0.0.1:{port}", "--workers", "1", "--timeout", "120", "--graceful-timeout", "2"]  # fmt: skip
    web = LiveWeb(url=f"http://127.0.0.1:{port}", argv=argv, env=env, log_path=logdir / "web.log")
    web.start()
    try:
        yield web
    finally:
        web.stop()
