"""Liveness for the processes that serve no HTTP: heartbeat files and the probe that reads them.

A long-running process calls ``beat(name)`` while it is doing its job; the probe
``python -m config.liveness NAME`` exits 0 while the file ``NAME.heartbeat`` is
fresh and 1 (with the reason on stderr) when it is missing or too old. Kubernetes
exec probes and docker compose healthchecks run that command.

- worker: ``WorkerHeartbeat``, a consumer bootstep that config/celery_app.py adds
  by name, beats every few seconds from the worker's event loop while the consumer
  is connected to the broker, so a worker that hangs or never reconnects goes stale.
- beat: ``celery beat --scheduler config.liveness:HeartbeatScheduler`` beats on
  every scheduler tick (at least every ``HeartbeatScheduler.max_interval`` seconds).
- controller: ``apps.deployments.controller`` calls ``beat("controller")``.

The files live in ``$SLIPWAY_STATE_DIR`` (or the temporary folder when unset). No
Django import here: the probe must be cheap and must not need the database.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from celery import bootsteps
from celery.beat import PersistentScheduler

log = logging.getLogger(__name__)

# Seconds between two worker heartbeats.
HEARTBEAT_SECONDS = 10.0
# A heartbeat older than this means the process is stuck. The controller beats at
# least every 30 s (its resync), the worker every 10 s, beat every 30 s.
DEFAULT_MAX_AGE = 120.0
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


def heartbeat_dir() -> Path:
    """Return the folder that holds the heartbeat files."""
    return Path(os.environ.get("SLIPWAY_STATE_DIR") or tempfile.gettempdir())


def heartbeat_path(name: str) -> Path:
    """Return the heartbeat file of process ``name``; reject names that are not plain words."""
    if not NAME_PATTERN.match(name):
        raise ValueError(f"invalid process name {name!r}: use lowercase letters, digits and hyphens")
    return heartbeat_dir() / f"{name}.heartbeat"


def beat(name: str) -> None:
    """Record that process ``name`` is alive now.

    Never raises for a file system error: the probe reports a missing or stale
    heartbeat, which is what should happen when the state folder is unusable.
    """
    path = heartbeat_path(name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        os.utime(path)  # touch() keeps the old time on some file systems when the file exists
    except OSError as e:
        log.warning("cannot write the %s heartbeat %s: %s", name, path, e.strerror)


def verdict(name: str, *, modified: float | None, now: float, max_age: float) -> tuple[bool, str]:
    """Return whether a heartbeat written at ``modified`` (None: never) is fresh at ``now``, and why."""
    if modified is None:
        return False, f"{name}: no heartbeat yet"
    age = now - modified
    if age > max_age:
        return False, f"{name}: last heartbeat {age:.0f}s ago, more than the {max_age:.0f}s allowed"
    return True, f"{name}: alive, last heartbeat {max(age, 0):.0f}s ago"


def check(name: str, *, max_age: float = DEFAULT_MAX_AGE, now: float | None = None) -> tuple[bool, str]:
    """Read the heartbeat file of ``name`` and judge it."""
    path = heartbeat_path(name)
    try:
        modified: float | None = path.stat().st_mtime
    except FileNotFoundError:
        modified = None
    except OSError as e:
        return False, f"{name}: cannot read the heartbeat: {e.strerror} ({path})"
    ok, message = verdict(name, modified=modified, now=time.time() if now is None else now, max_age=max_age)
    return ok, f"{message} ({path})"


class WorkerHeartbeat(bootsteps.StartStopStep):
    """Beat ``worker`` every HEARTBEAT_SECONDS while the consumer runs.

    A consumer step is stopped when the broker connection is lost and started again
    on reconnect, so the heartbeat goes stale while the worker cannot take tasks.
    """

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.tref: Any = None

    def start(self, parent: Any) -> None:
        beat("worker")
        self.tref = parent.timer.call_repeatedly(HEARTBEAT_SECONDS, beat, ("worker",), priority=10)

    def stop(self, parent: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None

    shutdown = stop


class HeartbeatScheduler(PersistentScheduler):
    """Celery beat's default scheduler that also beats ``beat`` on every tick."""

    # Wake at least this often even when nothing is due, so the heartbeat stays fresh.
    max_interval = 30

    def tick(self, *args: Any, **kwargs: Any) -> float:
        beat("beat")
        return super().tick(*args, **kwargs)  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m config.liveness",
        description="Exit 0 while the process's heartbeat file is fresh, 1 when it is missing or stale.",
    )
    parser.add_argument("name", help="the process: worker, beat or controller")
    parser.add_argument("--max-age", type=float, default=DEFAULT_MAX_AGE, help=f"seconds (default {DEFAULT_MAX_AGE:.0f})")
    args = parser.parse_args(argv)
    if args.max_age <= 0:
        parser.error(f"--max-age must be a positive number of seconds, not {args.max_age:g}")
    try:
        ok, message = check(args.name, max_age=args.max_age)
    except ValueError as e:
        parser.error(str(e))
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
