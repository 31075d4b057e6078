"""Deployments and their stored logs over the API."""

from __future__ import annotations

import pytest

from apps.deployments import logs, services
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import LogLine
from apps.webhooks.models import WebhookDelivery
from tests.api.sse import read_stream

pytestmark = pytest.mark.django_db
COMMIT = services.Commit("3f2a9c1d0e5b7a8c9d0e1f2a3b4c5d6e7f8a9b0c", "Fix checkout", "Alice <alice@example.com>")


def test_deployments_are_listed_newest_first_a_page_at_a_time(api, alice, shop):
    for _ in range(3):
        services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    body = api(alice).get("/api/v1/apps/shop/deployments?limit=2").json()
    assert body["count"] == 3
    assert [d["number"] for d in body["results"]] == [3, 2]
    assert body["next"].endswith("limit=2&offset=2")


def test_a_deployment_reads_by_number_with_its_commit_and_error(api, alice, shop):
    deployment = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    transition(deployment, to=Status.FAILED, error="git clone failed: branch `main` has no commit `3f2a9c1`")
    body = api(alice).get("/api/v1/apps/shop/deployments/1").json()
    assert body["number"] == 1 and body["status"] == "failed"
    assert body["status_meaning"] == "Build or deploy failed — see logs for details"
    assert body["error"] == "git clone failed: branch `main` has no commit `3f2a9c1`"
    assert body["commit"] == {"sha": COMMIT.sha, "message": "Fix checkout", "author": "Alice <alice@example.com>"}
    assert body["triggered_by"] == "alice" and body["log_seq"] == 1
    assert body["logs_url"] == "/api/v1/apps/shop/deployments/1/logs"


def test_a_field_mask_on_a_deployment(api, alice, shop):
    services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    body = api(alice).get("/api/v1/apps/shop/deployments/1?fields=status,error").json()
    assert body == {"status": "pending", "error": ""}
    page = api(alice).get("/api/v1/apps/shop/deployments?fields=number").json()
    assert page["results"] == [{"number": 1}]


def test_a_missing_deployment_is_404(api, alice, shop):
    response = api(alice).get("/api/v1/apps/shop/deployments/7")
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "shop has no deployment #7."


def test_outsiders_see_no_deployments(api, charlie, alice, shop):
    services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    for path in ("deployments", "deployments/1", "deployments/1/logs", "webhook-deliveries"):
        assert api(charlie).get(f"/api/v1/apps/shop/{path}").status_code == 404


def test_the_stored_log_reads_as_plain_text_lines(api, alice, shop):
    deployment = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    logs.append(deployment, LogLine.Step.BUILD, "Step 1/4: FROM python:3.11")
    logs.append(deployment, LogLine.Step.PUSH, "pushed 127.0.0.1:5000/shop")
    response = api(alice).get("/api/v1/apps/shop/deployments/1/logs")
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    lines = response.content.decode().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "[system] Deployment #1 created by alice (push).",
        "[build] Step 1/4: FROM python:3.11",
        "[push] pushed 127.0.0.1:5000/shop",
    ]
    assert lines[0][:2] == "20" and lines[0][19] == "Z"


def test_the_stored_log_can_start_after_a_line(api, alice, shop):
    deployment = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    logs.append(deployment, LogLine.Step.BUILD, "second")
    text = api(alice).get("/api/v1/apps/shop/deployments/1/logs?after=1").content.decode()
    assert text.endswith("[build] second\n") and "created by" not in text


def test_a_bad_after_is_refused(api, alice, shop):
    services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    response = api(alice).get("/api/v1/apps/shop/deployments/1/logs?after=-3")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "after"


def test_following_the_log_of_a_settled_deployment_sends_it_and_ends(api, alice, shop):
    deployment = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    logs.append(deployment, LogLine.Step.BUILD, "boom")
    transition(deployment, to=Status.FAILED, error="build failed: exit 1")
    response = api(alice).get("/api/v1/apps/shop/deployments/1/logs?follow=1")
    assert response["Content-Type"] == "text/event-stream; charset=utf-8"
    text = read_stream(response)
    assert "id: 2\nevent: log\n" in text and '"text":"boom"' in text
    assert text.endswith(
        'event: end\ndata: {"number":1,"status":"failed","error":"build failed: exit 1","stopped_reason":""}\n\n'
    )


def test_a_bad_follow_flag_is_refused(api, alice, shop):
    services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    response = api(alice).get("/api/v1/apps/shop/deployments/1/logs?follow=perhaps")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "follow"


def test_webhook_deliveries_are_listed_newest_first(api, alice, shop):
    deployment = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    WebhookDelivery.objects.create(
        app=shop, provider="github", event="ping", signature="valid", outcome="ignored", reason="ping", status_code=202
    )
    WebhookDelivery.objects.create(
        app=shop,
        provider="github",
        event="push",
        delivery_id="d-2",
        signature="valid",
        outcome="deployed",
        status_code=202,
        deployment=deployment,
    )
    body = api(alice).get("/api/v1/apps/shop/webhook-deliveries").json()
    assert [(d["event"], d["outcome"], d["deployment"]) for d in body["results"]] == [
        ("push", "deployed", 1),
        ("ping", "ignored", None),
    ]
