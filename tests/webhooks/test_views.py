"""The webhook endpoint: signed pushes become one deployment of the pushed commit; everything else is answered and recorded."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
from urllib.parse import urlencode

import pytest
from django.core.handlers.asgi import ASGIRequest
from django.db import OperationalError, connection
from django.test import Client
from django.utils import timezone

from apps.deployments import reconciler
from apps.deployments import services as deployment_services
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import Deployment
from apps.webhooks import views
from apps.webhooks.models import WebhookDelivery
from tests.factories import ImageAppFactory
from tests.webhooks.conftest import (
    GITEA_PUSH_SHA,
    GITHUB_PUSH_SHA,
    GITLAB_PUSH_SHA,
    deliver,
    fixture_bytes,
    provider_headers,
    push_body,
)

pytestmark = pytest.mark.django_db

PUSHES = [
    (
        "github",
        "github/push",
        "push",
        GITHUB_PUSH_SHA,
        "Update README",
        "Codertocat <21031067+Codertocat@users.noreply.github.com>",
    ),
    ("gitlab", "gitlab/push", "Push Hook", GITLAB_PUSH_SHA, "added readme", "Sid Sijbrandij <noreply@gitlab.com>"),
    ("gitea", "gitea/push", "push", GITEA_PUSH_SHA, "Updated readme", "Unknwon <noreply@gogs.io>"),
    ("forgejo", "gitea/push", "push", GITEA_PUSH_SHA, "Updated readme", "Unknwon <noreply@gogs.io>"),
]


def only_delivery(app) -> WebhookDelivery:
    deliveries = list(WebhookDelivery.objects.filter(app=app))
    assert len(deliveries) == 1, deliveries
    return deliveries[0]


# Deploying ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("provider", "fixture", "event", "sha", "message", "author"), PUSHES)
def test_a_signed_push_to_the_apps_branch_creates_one_pending_deployment_of_that_commit(
    client, shop_on_master, provider, fixture, event, sha, message, author
):
    response = deliver(client, shop_on_master, provider, fixture_bytes(fixture), event=event, delivery="d-1")

    assert response.status_code == 202
    deployment = Deployment.objects.get(app=shop_on_master)
    assert (deployment.status, deployment.trigger, deployment.triggered_by) == (Status.PENDING, "push", None)
    assert (deployment.commit_sha, deployment.commit_message, deployment.commit_author) == (sha, message, author)
    assert response.json() == {
        "outcome": "deployed",
        "reason": f"push to master: {sha[:7]} deployed as #1",
        "deployment": {"number": 1, "status": "pending", "commit": sha, "url": "http://localhost:8000/apps/shop/deployments/1/"},
    }
    delivery = only_delivery(shop_on_master)
    expected_provider = "gitea" if provider == "forgejo" else provider
    assert (delivery.provider, delivery.event, delivery.delivery_id) == (expected_provider, event, "d-1")
    assert (delivery.signature, delivery.outcome, delivery.status_code, delivery.deployment) == (
        "valid",
        "deployed",
        202,
        deployment,
    )


def test_the_deployment_log_says_who_pushed_and_through_which_webhook(client, shop_on_master):
    deliver(client, shop_on_master, "github", fixture_bytes("github/push"), delivery="72d3162e")
    lines = [line.text for line in Deployment.objects.get().log_lines.all()]
    assert lines[-1] == "Push of 199eddf to master by Codertocat, received by GitHub webhook (delivery 72d3162e)."


def test_a_push_to_a_branch_with_slashes_deploys_an_app_on_that_branch(client, shop):
    type(shop).objects.filter(pk=shop.pk).update(branch="release/2.0")
    shop.refresh_from_db()
    response = deliver(client, shop, "github", push_body("github", sha="a" * 40, branch="release/2.0"))
    assert response.status_code == 202
    assert Deployment.objects.get().commit_sha == "a" * 40


def test_a_github_form_encoded_delivery_is_read_from_its_payload_field(client, shop_on_master):
    body = urlencode({"payload": fixture_bytes("github/push").decode()}).encode()
    response = deliver(client, shop_on_master, "github", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 202
    assert Deployment.objects.get().commit_sha == GITHUB_PUSH_SHA


def test_the_endpoint_needs_no_csrf_token(shop_on_master):
    response = deliver(Client(enforce_csrf_checks=True), shop_on_master, "github", fixture_bytes("github/push"))
    assert response.status_code == 202


def test_the_url_works_without_its_trailing_slash(client, shop_on_master):
    body = fixture_bytes("github/push")
    headers = provider_headers("github", body, secret=shop_on_master.webhook_secret, event="push")
    response = client.post(f"/webhooks/{shop_on_master.webhook_id}", data=body, content_type="application/json", headers=headers)
    assert response.status_code == 202


def test_a_new_push_supersedes_the_pending_deployment_of_the_previous_one(client, shop_on_master):
    deliver(client, shop_on_master, "github", push_body("github", sha="a" * 40))
    response = deliver(client, shop_on_master, "github", push_body("github", sha="b" * 40))
    assert response.json()["deployment"]["number"] == 2
    first, second = Deployment.objects.order_by("number")
    assert (first.status, first.stopped_reason, second.status) == ("stopped", "superseded by #2", "pending")


# Exactly once ------------------------------------------------------------------------------------


def test_a_redelivery_of_a_deployed_delivery_creates_no_second_deployment(client, shop_on_master):
    body = fixture_bytes("github/push")
    deliver(client, shop_on_master, "github", body, delivery="same-id")
    deployment = Deployment.objects.get()
    transition(deployment, to=Status.DEPLOYING, image="127.0.0.1:5000/shop@sha256:" + "a" * 64)
    transition(deployment, to=Status.LIVE)

    again = deliver(client, shop_on_master, "github", body, delivery="same-id")

    assert again.status_code == 200
    assert again.json()["outcome"] == "ignored"
    assert again.json()["reason"] == "delivery same-id was already deployed as #1"
    assert again.json()["deployment"]["number"] == 1
    assert Deployment.objects.count() == 1
    assert list(WebhookDelivery.objects.values_list("outcome", flat=True)) == ["ignored", "deployed"]


def test_the_same_delivery_id_from_another_provider_is_another_delivery(client, shop_on_master):
    deliver(client, shop_on_master, "github", push_body("github", sha="a" * 40), delivery="d-1")
    response = deliver(client, shop_on_master, "gitea", push_body("gitea", sha="b" * 40), delivery="d-1")
    assert response.status_code == 202


def test_a_commit_already_deploying_is_not_deployed_twice(client, shop_on_master):
    # Two hooks on one repository (say, repository and organisation) deliver one push twice.
    deliver(client, shop_on_master, "github", fixture_bytes("github/push"), delivery="from-repo-hook")
    transition(Deployment.objects.get(), to=Status.BUILDING)
    response = deliver(client, shop_on_master, "github", fixture_bytes("github/push"), delivery="from-org-hook")
    assert (response.status_code, response.json()["reason"]) == (200, "199eddf is already deploying as #1")
    assert Deployment.objects.count() == 1


def test_gitlab_deliveries_without_an_id_are_still_deployed_once_per_commit(client, shop_on_master):
    body = fixture_bytes("gitlab/push")
    headers = {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": shop_on_master.webhook_secret}
    url = f"/webhooks/{shop_on_master.webhook_id}/"
    first = client.post(url, data=body, content_type="application/json", headers=headers)
    second = client.post(url, data=body, content_type="application/json", headers=headers)
    assert (first.status_code, second.status_code) == (202, 200)
    assert Deployment.objects.count() == 1


def test_a_commit_whose_deployment_finished_deploys_again_when_pushed_again(client, shop_on_master):
    deliver(client, shop_on_master, "github", fixture_bytes("github/push"))
    transition(Deployment.objects.get(), to=Status.FAILED, reason="build failed")
    response = deliver(client, shop_on_master, "github", fixture_bytes("github/push"))
    assert response.status_code == 202 and Deployment.objects.count() == 2


# Ignored -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "fixture", "event", "reason"),
    [
        ("github", "github/push_tag", "push", "tag v0.0.1 does not deploy; only pushes to a branch do"),
        ("github", "github/push_branch_delete", "push", "branch feature-branch was deleted"),
        ("gitlab", "gitlab/tag_create", "Tag Push Hook", "tag v1.0.0 does not deploy; only pushes to a branch do"),
        ("gitlab", "gitlab/branch_delete", "Push Hook", "branch feature was deleted"),
        ("gitea", "gitea/branch_delete", "delete", "branch feature was deleted"),
        ("github", "github/push", "issues", "issues events do not deploy"),
    ],
)
def test_tags_branch_deletions_and_other_events_are_acknowledged_and_ignored(
    client, shop_on_master, provider, fixture, event, reason
):
    response = deliver(client, shop_on_master, provider, fixture_bytes(fixture), event=event)
    assert response.status_code == 200
    assert response.json() == {"outcome": "ignored", "reason": reason}
    delivery = only_delivery(shop_on_master)
    assert (delivery.outcome, delivery.reason, delivery.signature, delivery.status_code) == ("ignored", reason, "valid", 200)
    assert not Deployment.objects.exists()


def test_a_push_to_another_branch_is_ignored(client, shop):
    response = deliver(client, shop, "github", fixture_bytes("github/push"))
    assert response.json() == {"outcome": "ignored", "reason": "push to master; this app deploys main"}
    assert not Deployment.objects.exists()


def test_a_github_ping_answers_pong(client, shop_on_master):
    response = deliver(client, shop_on_master, "github", fixture_bytes("github/ping"), event="ping")
    assert response.status_code == 200
    assert response.json() == {"outcome": "ignored", "reason": "ping: Anything added dilutes everything else.", "pong": True}
    assert only_delivery(shop_on_master).event == "ping"


def test_a_gitea_test_delivery_does_not_deploy(client, shop_on_master):
    payload = json.loads(fixture_bytes("gitea/push"))
    payload["before"] = payload["after"]
    response = deliver(client, shop_on_master, "gitea", json.dumps(payload).encode())
    assert response.json() == {"outcome": "ignored", "reason": "ping: test delivery"}
    assert not Deployment.objects.exists()


def test_a_commit_asking_to_skip_deploys_is_recorded_as_ignored(client, shop_on_master):
    response = deliver(client, shop_on_master, "gitlab", push_body("gitlab", sha="e" * 40, message="Docs only [skip deploy]"))
    assert response.json()["reason"] == "commit eeeeeee asks to skip with [skip deploy]"
    assert only_delivery(shop_on_master).outcome == "ignored"
    assert not Deployment.objects.exists()


def test_an_image_app_ignores_pushes(client, acme):
    app = ImageAppFactory(team=acme, branch="master")
    response = deliver(client, app, "github", fixture_bytes("github/push"))
    assert response.json()["reason"] == "this app deploys an image, not a git branch"
    assert not Deployment.objects.exists()


# Rejected ----------------------------------------------------------------------------------------


def assert_error(response, status: int, code: str, message: str, field: str | None = None) -> None:
    assert response.status_code == status
    body = json.loads(response.content)
    assert body["error"]["code"] == code
    assert message in body["error"]["message"]
    assert body["error"]["field"] == field


def assert_rejected(app, status: int, signature: str) -> WebhookDelivery:
    delivery = only_delivery(app)
    assert (delivery.outcome, delivery.status_code, delivery.signature) == ("rejected", status, signature)
    assert not Deployment.objects.exists()
    return delivery


def test_an_unknown_webhook_id_is_not_found_and_records_nothing(client, shop_on_master):
    body = fixture_bytes("github/push")
    headers = provider_headers("github", body, secret=shop_on_master.webhook_secret, event="push")
    for webhook_id in ["no-such-hook", "x" * 200]:
        response = client.post(f"/webhooks/{webhook_id}/", data=body, content_type="application/json", headers=headers)
        assert_error(response, 404, "not_found", "No app has this webhook URL")
    assert not WebhookDelivery.objects.exists() and not Deployment.objects.exists()


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_methods_other_than_post_are_not_allowed(client, shop_on_master, method):
    response = getattr(client, method)(f"/webhooks/{shop_on_master.webhook_id}/")
    assert_error(response, 405, "method_not_allowed", f"Method {method.upper()} is not allowed")
    assert response["Allow"] == "POST"
    assert_rejected(shop_on_master, 405, "missing")


@pytest.mark.parametrize("provider", ["github", "gitlab", "gitea"])
def test_a_delivery_without_a_signature_is_unauthorized(client, shop_on_master, provider):
    response = deliver(client, shop_on_master, provider, fixture_bytes(f"{provider}/push"), secret=None)
    header = {"github": "X-Hub-Signature-256", "gitlab": "X-Gitlab-Token", "gitea": "X-Gitea-Signature"}[provider]
    assert_error(response, 401, "signature_missing", f"{header} is missing", header)
    assert_rejected(shop_on_master, 401, "missing")


@pytest.mark.parametrize("provider", ["github", "gitlab", "gitea"])
def test_a_delivery_signed_with_another_secret_is_unauthorized(client, shop_on_master, provider):
    response = deliver(client, shop_on_master, provider, fixture_bytes(f"{provider}/push"), secret="not-the-apps-secret")
    assert response.status_code == 401 and response.json()["error"]["code"] == "signature_invalid"
    assert_rejected(shop_on_master, 401, "invalid")


def test_a_tampered_body_is_unauthorized(client, shop_on_master):
    body = fixture_bytes("github/push")
    headers = provider_headers("github", body, secret=shop_on_master.webhook_secret, event="push")
    tampered = body.replace(b"refs/heads/master", b"refs/heads/evil00")
    response = client.post(
        f"/webhooks/{shop_on_master.webhook_id}/", data=tampered, content_type="application/json", headers=headers
    )
    assert_error(response, 401, "signature_invalid", "X-Hub-Signature-256 does not match", "X-Hub-Signature-256")
    assert_rejected(shop_on_master, 401, "invalid")


def test_a_signature_over_re_serialised_json_is_unauthorized(client, shop_on_master):
    body = fixture_bytes("github/push")
    reserialised = json.dumps(json.loads(body)).encode()
    headers = provider_headers("github", reserialised, secret=shop_on_master.webhook_secret, event="push")
    response = client.post(f"/webhooks/{shop_on_master.webhook_id}/", data=body, content_type="application/json", headers=headers)
    assert response.status_code == 401


def test_the_secret_is_never_logged_even_on_mismatch(client, shop_on_master, caplog):
    caplog.set_level(logging.DEBUG)
    deliver(client, shop_on_master, "gitlab", fixture_bytes("gitlab/push"), secret="wrong")
    deliver(client, shop_on_master, "gitlab", fixture_bytes("gitlab/push"))
    assert caplog.records, "the 401 is logged"
    assert shop_on_master.webhook_secret not in caplog.text
    assert shop_on_master.webhook_secret not in "".join(WebhookDelivery.objects.values_list("reason", flat=True))


def test_a_body_that_is_not_json_is_a_bad_request(client, shop_on_master):
    response = deliver(client, shop_on_master, "github", b"{this is not json")
    assert_error(response, 400, "invalid", "The body is not valid JSON")
    assert_rejected(shop_on_master, 400, "valid")


@pytest.mark.parametrize(
    ("provider", "event", "field"),
    [("github", "push", "after"), ("gitlab", "Push Hook", "checkout_sha"), ("gitea", "push", "ref")],
)
def test_a_missing_required_field_is_a_bad_request_naming_it(client, shop_on_master, provider, event, field):
    payload = json.loads(fixture_bytes(f"{provider}/push"))
    payload[field] = 42 if field == "checkout_sha" else None
    if field != "checkout_sha":
        del payload[field]
    response = deliver(client, shop_on_master, provider, json.dumps(payload).encode(), event=event)
    assert response.status_code == 400
    assert response.json()["error"]["field"] == field
    assert_rejected(shop_on_master, 400, "valid")


def test_a_request_from_no_known_provider_is_a_bad_request(client, shop_on_master):
    response = client.post(f"/webhooks/{shop_on_master.webhook_id}/", data=b"{}", content_type="application/json")
    assert_error(response, 400, "unknown_provider", "expected X-GitHub-Event, X-Gitlab-Event or X-Gitea-Event", "X-GitHub-Event")
    delivery = assert_rejected(shop_on_master, 400, "missing")
    assert delivery.provider == "unknown"


def test_a_signed_delivery_without_its_event_header_is_a_bad_request(client, shop_on_master):
    body = fixture_bytes("gitea/push")
    headers = {
        "X-Gitea-Delivery": "d-1",
        "X-Gitea-Signature": provider_headers("gitea", body, secret=shop_on_master.webhook_secret, event="")["X-Gitea-Signature"],
    }
    response = client.post(f"/webhooks/{shop_on_master.webhook_id}/", data=body, content_type="application/json", headers=headers)
    assert_error(response, 400, "invalid", "The X-Gitea-Event header is missing", "X-Gitea-Event")


def test_a_body_declared_over_the_limit_is_refused_before_it_is_read(client, shop_on_master, settings):
    settings.WEBHOOK_MAX_BYTES = 4096
    body = fixture_bytes("github/push")
    assert len(body) > 4096
    response = deliver(client, shop_on_master, "github", body)
    assert_error(response, 413, "too_large", f"The body is {len(body)} bytes; deliveries may be at most 4096 bytes.")
    assert_rejected(shop_on_master, 413, "missing")


def test_a_body_over_the_limit_without_a_content_length_is_refused_after_reading_one_byte_more(shop_on_master, settings):
    # ASGI servers pass chunked bodies without Content-Length: the read itself is bounded.
    settings.WEBHOOK_MAX_BYTES = 4096
    body = fixture_bytes("github/push")
    headers = provider_headers("github", body, secret=shop_on_master.webhook_secret, event="push")
    scope = {
        "type": "http",
        "method": "POST",
        "path": f"/webhooks/{shop_on_master.webhook_id}/",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")] + [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    stream = io.BytesIO(body)
    request = ASGIRequest(scope, stream)
    assert "CONTENT_LENGTH" not in request.META
    response = views.receive(request, shop_on_master.webhook_id)
    assert_error(response, 413, "too_large", "The body is larger than 4096 bytes")
    assert stream.tell() == 4097
    assert_rejected(shop_on_master, 413, "missing")


def test_a_body_with_a_bad_content_length_is_a_bad_request(client, shop_on_master):
    body = fixture_bytes("github/push")
    headers = provider_headers("github", body, secret=shop_on_master.webhook_secret, event="push")
    response = client.generic(
        "POST",
        f"/webhooks/{shop_on_master.webhook_id}/",
        data=body,
        content_type="application/json",
        headers=headers,
        CONTENT_LENGTH="lots",
    )
    assert_error(response, 400, "invalid", "Content-Length is not a number", "Content-Length")


@pytest.mark.parametrize(
    ("provider", "content_type"),
    [("github", "text/plain"), ("gitlab", "application/x-www-form-urlencoded"), ("gitea", "multipart/form-data; boundary=x")],
)
def test_an_unsupported_content_type_is_refused_saying_to_choose_json(client, shop_on_master, provider, content_type):
    response = deliver(client, shop_on_master, provider, fixture_bytes(f"{provider}/push"), content_type=content_type)
    assert_error(response, 415, "unsupported_media_type", "set the webhook's content type to application/json", "Content-Type")
    assert_rejected(shop_on_master, 415, "valid")


# The database and the broker ---------------------------------------------------------------------


def failing_database(statement_prefix: str = ""):
    """A wrapper that makes matching SQL fail as if the database had gone away."""

    def wrapper(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith(statement_prefix.upper()):
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    return wrapper


def test_a_delivery_while_the_database_is_down_is_answered_503_with_retry_after(client, shop_on_master):
    body = fixture_bytes("github/push")
    with connection.execute_wrapper(failing_database()):
        response = deliver(client, shop_on_master, "github", body)
    assert_error(response, 503, "unavailable", "The database is unreachable; retry the delivery later.")
    assert response["Retry-After"] == "30"
    assert not WebhookDelivery.objects.exists() and not Deployment.objects.exists()


def test_a_database_failure_while_recording_leaves_nothing_behind(client, shop_on_master):
    with connection.execute_wrapper(failing_database('INSERT INTO "webhooks_webhookdelivery"')):
        response = deliver(client, shop_on_master, "github", fixture_bytes("github/push"))
    assert response.status_code == 503
    assert not WebhookDelivery.objects.exists() and not Deployment.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_pipeline_is_enqueued_once_after_commit(client, shop_on_master, broker):
    response = deliver(client, shop_on_master, "github", fixture_bytes("github/push"))
    deployment = Deployment.objects.get()
    assert response.status_code == 202
    assert broker.messages() == [("deployments.run", f"({deployment.pk},)")]


@pytest.mark.django_db(transaction=True)
def test_with_the_broker_down_the_delivery_is_accepted_and_the_deployment_started_later(
    client, shop_on_master, broker, caplog, settings
):
    broker.down()
    response = deliver(client, shop_on_master, "github", fixture_bytes("github/push"))
    assert response.status_code == 202
    deployment = Deployment.objects.get()
    assert (deployment.status, deployment.commit_sha) == (Status.PENDING, GITHUB_PUSH_SHA)
    assert only_delivery(shop_on_master).outcome == "deployed"
    assert "shop #1 is recorded but could not be enqueued (OperationalError" in caplog.text
    assert shop_on_master.webhook_secret not in caplog.text

    # Once the broker is back, the reconciler's next pass starts the deployment.
    broker.up()
    later = timezone.now() + dt.timedelta(seconds=settings.REDRIVE_AFTER + 1)
    assert reconciler.run(now=later)["redriven"] == 1
    assert broker.messages() == [("deployments.run", f"({deployment.pk},)")]


# Secrets and recent deliveries -------------------------------------------------------------------


def test_after_rotation_the_old_secret_is_refused_and_the_new_one_works(client, shop_on_master, alice):
    from apps.webhooks.services import webhook_secret_rotate

    old = shop_on_master.webhook_secret
    new = webhook_secret_rotate(app=shop_on_master, actor=alice)
    assert new != old and len(new) >= 32
    assert deliver(client, shop_on_master, "github", fixture_bytes("github/push"), secret=old).status_code == 401
    assert deliver(client, shop_on_master, "github", fixture_bytes("github/push"), secret=new).status_code == 202


def test_a_push_of_a_commit_someone_is_already_deploying_by_hand_is_not_doubled(client, shop_on_master, alice):
    deployment_services.deployment_create(
        app=shop_on_master, trigger="manual", actor=alice, commit=deployment_services.Commit(GITHUB_PUSH_SHA)
    )
    response = deliver(client, shop_on_master, "github", fixture_bytes("github/push"))
    assert response.json()["reason"] == "199eddf is already deploying as #1"
