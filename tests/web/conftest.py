"""Helpers for the web UI tests: deployments in a given state, signed-in clients."""

from __future__ import annotations

import pytest

from apps.deployments import logs
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import Deployment, LogLine
from apps.deployments.services import Commit, deployment_create

IMAGE = "127.0.0.1:5000/shop@sha256:" + "a" * 64
COMMIT = Commit("3f2a9c1d0e5b7a8c9d0e1f2a3b4c5d6e7f8a9b0c", "Fix the checkout total", "Alice Example <alice@example.com>")


def deploy(
    app, actor=None, *, to: str = Status.PENDING, image: str = IMAGE, error: str = "", commit: Commit = COMMIT
) -> Deployment:
    """Create a deployment of ``app`` and walk it through the lifecycle to ``to``."""
    d = deployment_create(app=app, trigger=Deployment.Trigger.MANUAL, actor=actor, commit=commit)
    path = {
        Status.PENDING: [],
        Status.BUILDING: [Status.BUILDING],
        Status.DEPLOYING: [Status.BUILDING, Status.DEPLOYING],
        Status.LIVE: [Status.BUILDING, Status.DEPLOYING, Status.LIVE],
        Status.FAILED: [Status.BUILDING, Status.FAILED],
        Status.STOPPED: [Status.BUILDING, Status.DEPLOYING, Status.LIVE, Status.STOPPED],
    }[to]
    for step in path:
        kwargs = {}
        if step == Status.DEPLOYING:
            kwargs["image"] = image
        if step == Status.FAILED:
            kwargs["error"] = error or "git clone failed: branch `main` has no commit `3f2a9c1`"
        transition(d, to=step, **kwargs)
    app.refresh_from_db()
    return d


def log(d: Deployment, step: str, *texts: str) -> None:
    for text in texts:
        logs.append(d, step, text)


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def steps():
    return LogLine.Step
