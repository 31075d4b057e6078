"""Copies of a delivery arriving at the same instant make one deployment.

Each copy is a real request on its own thread with its own database connection, all
released together by a barrier. Run on PostgreSQL (DATABASE_URL=postgres://…) this
exercises row locks and the partial unique constraint under true concurrency; on
SQLite writers are serialised by the database itself.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections
from django.test import Client

from apps.deployments.models import Deployment
from apps.webhooks.models import WebhookDelivery
from tests.webhooks.conftest import GITHUB_PUSH_SHA, fixture_bytes, provider_headers, push_body

pytestmark = pytest.mark.django_db(transaction=True)

COPIES = 8


def deliver_at_once(app, bodies_and_ids: list[tuple[bytes, str]]) -> list[int]:
    """Send every (body, delivery id) as a GitHub push from its own thread, released together; return the status codes."""
    barrier = threading.Barrier(len(bodies_and_ids))

    def send(body_and_id: tuple[bytes, str]) -> int:
        body, delivery = body_and_id
        headers = provider_headers("github", body, secret=app.webhook_secret, event="push", delivery=delivery)
        client = Client()
        try:
            barrier.wait(timeout=10)
            return client.post(
                f"/webhooks/{app.webhook_id}/", data=body, content_type="application/json", headers=headers
            ).status_code
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=len(bodies_and_ids)) as pool:
        return list(pool.map(send, bodies_and_ids))


@pytest.fixture
def sqlite_shared_cache_guard():
    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        pytest.skip("an in-memory SQLite test database is one shared-cache connection; run with a file or PostgreSQL database")


def test_identical_deliveries_at_the_same_instant_make_one_deployment(shop_on_master, broker, sqlite_shared_cache_guard):
    body = fixture_bytes("github/push")
    statuses = deliver_at_once(shop_on_master, [(body, "one-delivery-id")] * COPIES)

    assert sorted(statuses) == [200] * (COPIES - 1) + [202]
    deployment = Deployment.objects.get()
    assert deployment.commit_sha == GITHUB_PUSH_SHA
    outcomes = sorted(WebhookDelivery.objects.values_list("outcome", flat=True))
    assert outcomes == ["deployed"] + ["ignored"] * (COPIES - 1)
    reasons = set(WebhookDelivery.objects.filter(outcome="ignored").values_list("reason", flat=True))
    assert reasons == {"delivery one-delivery-id was already deployed as #1"}
    assert broker.messages() == [("deployments.run", f"({deployment.pk},)")]


def test_deliveries_of_one_commit_from_several_hooks_at_once_make_one_deployment(
    shop_on_master, broker, sqlite_shared_cache_guard
):
    body = fixture_bytes("github/push")
    statuses = deliver_at_once(shop_on_master, [(body, f"hook-{n}") for n in range(COPIES)])

    assert sorted(statuses) == [200] * (COPIES - 1) + [202]
    assert Deployment.objects.count() == 1
    assert WebhookDelivery.objects.filter(outcome="ignored", reason="199eddf is already deploying as #1").count() == COPIES - 1


def test_pushes_of_different_commits_at_once_are_numbered_without_gaps_and_the_last_is_current(
    shop_on_master, broker, sqlite_shared_cache_guard
):
    shas = [f"{n:x}" * 40 for n in range(1, 6)]
    statuses = deliver_at_once(shop_on_master, [(push_body("github", sha=sha), sha) for sha in shas])

    assert statuses == [202] * len(shas)
    deployments = list(Deployment.objects.order_by("number"))
    assert [d.number for d in deployments] == [1, 2, 3, 4, 5]
    assert sorted(d.commit_sha for d in deployments) == sorted(shas)
    # Each newer deployment stopped the one before it: one is left pending.
    assert [d.status for d in deployments] == ["stopped"] * 4 + ["pending"]
    shop_on_master.refresh_from_db()
    assert shop_on_master.current_deployment == deployments[-1]
