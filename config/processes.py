"""Slipway's processes and the commands that start them: one place for the embedded run and the tests.

The container image, docker-compose.yml and platform/ run the same commands (a test in
tests/install keeps them in step).
"""

from __future__ import annotations

import sys
from pathlib import Path


def commands(*, bind: str, state_dir: Path, web_workers: int = 2, python: str = sys.executable) -> dict[str, list[str]]:
    """Return the argv of web, worker, beat and controller."""
    return {
        "web": [python, "-m", "gunicorn", "config.asgi:application", "-k", "uvicorn_worker.UvicornWorker",
                "--bind", bind, "--workers", str(web_workers), "--timeout", "120"],
        "worker": [python, "-m", "celery", "-A", "config", "worker", "--loglevel", "INFO", "--concurrency", "2",
                   "--without-gossip", "--without-mingle"],
        "beat": [python, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
                 "--schedule", str(state_dir / "celerybeat-schedule")],
        "controller": [python, "manage.py", "runcontroller"],
    }  # fmt: skip
