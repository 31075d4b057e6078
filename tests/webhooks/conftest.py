"""Deliveries as the providers send them: fixture payloads signed over their exact bytes."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from pathlib import Path

import pytest

from apps.deployments.models import App

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "webhooks"

# The commit each push fixture pushes.
GITHUB_PUSH_SHA = "199eddf46df50de8d02e99bf1c5fdb4101338224"
GITLAB_PUSH_SHA = "2adc9465c4edfc33834e173fe89436a7cb899a1d"
GITEA_PUSH_SHA = "4522cbcefc20728a5b72b3a86af35e608622c514"


def fixture_bytes(name: str) -> bytes:
    """Return a fixture payload's exact bytes, e.g. ``fixture_bytes("github/push")``."""
    return (FIXTURES / f"{name}.json").read_bytes()


def fixture_json(name: str) -> dict:
    return json.loads(fixture_bytes(name))


def hmac_hex(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def provider_headers(
    provider: str, body: bytes, *, secret: str | None, event: str, delivery: str | None = None
) -> dict[str, str]:
    """Return the headers ``provider`` sends with ``body``; no signature header when ``secret`` is None."""
    delivery = delivery or str(uuid.uuid4())
    if provider == "github":
        headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "User-Agent": "GitHub-Hookshot/abc"}
        if secret is not None:
            headers["X-Hub-Signature-256"] = "sha256=" + hmac_hex(secret, body)
    elif provider == "gitlab":
        headers = {"X-Gitlab-Event": event, "X-Gitlab-Event-UUID": delivery, "Idempotency-Key": delivery}
        if secret is not None:
            headers["X-Gitlab-Token"] = secret
    elif provider in ("gitea", "forgejo"):
        # Gitea sends GitHub's and Gogs' headers too; Forgejo adds its own names for the same values.
        headers = {"X-Gitea-Event": event, "X-Gitea-Delivery": delivery, "X-GitHub-Event": event, "X-GitHub-Delivery": delivery}
        if provider == "forgejo":
            headers.update({"X-Forgejo-Event": event, "X-Forgejo-Delivery": delivery})
        if secret is not None:
            headers["X-Gitea-Signature"] = hmac_hex(secret, body)
            headers["X-Hub-Signature-256"] = "sha256=" + hmac_hex(secret, body)
            if provider == "forgejo":
                headers["X-Forgejo-Signature"] = hmac_hex(secret, body)
    else:
        raise ValueError(provider)
    return headers


DEFAULT_EVENTS = {"github": "push", "gitlab": "Push Hook", "gitea": "push", "forgejo": "push"}


def deliver(
    client,
    app: App,
    provider: str,
    body: bytes,
    *,
    event: str | None = None,
    secret: str | None | bool = True,
    delivery: str | None = None,
    content_type: str = "application/json",
    extra: dict[str, str] | None = None,
):
    """POST ``body`` to the app's webhook URL as ``provider`` would, signed with the app's secret unless told otherwise."""
    if secret is True:
        secret = app.webhook_secret
    headers = provider_headers(provider, body, secret=secret or None, event=event or DEFAULT_EVENTS[provider], delivery=delivery)
    headers.update(extra or {})
    return client.post(f"/webhooks/{app.webhook_id}/", data=body, content_type=content_type, headers=headers)


def push_body(provider: str, *, sha: str, branch: str = "master", message: str = "Update README") -> bytes:
    """Return a fixture push payload rewritten to push ``sha`` to ``branch``."""
    payload = fixture_json(f"{provider}/push")
    old = {"github": GITHUB_PUSH_SHA, "gitlab": GITLAB_PUSH_SHA, "gitea": GITEA_PUSH_SHA}[provider]
    payload["ref"] = f"refs/heads/{branch}"
    payload["after"] = sha
    if provider == "gitlab":
        payload["checkout_sha"] = sha
    for commit in payload.get("commits", []) + [payload.get("head_commit") or {}]:
        if commit.get("id") == old:
            commit["id"], commit["message"] = sha, message
    return json.dumps(payload).encode()


@pytest.fixture
def shop_on_master(shop):
    """alice's shop, deploying the branch the fixture pushes go to."""
    App.objects.filter(pk=shop.pk).update(branch="master")
    shop.refresh_from_db()
    return shop


class Broker:
    """The Celery broker for one test: a filesystem queue in a temporary folder, or a Redis that refuses connections."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _use(self, url: str, options: dict) -> None:
        from config.celery_app import app as celery_app

        # Celery reads its settings through the CELERY_ namespace; its connection pools keep
        # the old broker until dropped.
        celery_app.conf["CELERY_BROKER_URL"] = url
        celery_app.conf["CELERY_BROKER_TRANSPORT_OPTIONS"] = options
        celery_app._pool = None
        celery_app.amqp._producer_pool = None

    def up(self) -> None:
        folder = str(self.folder)
        self._use(
            "filesystem://",
            {"data_folder_in": folder, "data_folder_out": folder, "processed_folder": folder, "store_processed": False},
        )

    def down(self) -> None:
        """Point Celery at a closed port: publishing raises kombu's OperationalError, as with Redis down."""
        self._use("redis://127.0.0.1:1/0", {})

    def messages(self) -> list[tuple[str, str]]:
        """Return (task name, args) of every message published so far."""
        found = []
        for path in sorted(self.folder.glob("*.msg")):
            headers = json.loads(path.read_text())["headers"]
            found.append((headers["task"], headers["argsrepr"]))
        return found


@pytest.fixture
def broker(tmp_path):
    from config.celery_app import app as celery_app

    saved = (celery_app.conf["CELERY_BROKER_URL"], celery_app.conf["CELERY_BROKER_TRANSPORT_OPTIONS"])
    folder = tmp_path / "broker"
    folder.mkdir()
    b = Broker(folder)
    b.up()
    yield b
    b._use(*saved)
