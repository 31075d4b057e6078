"""Deployment services: numbering, superseding, actions and their refusals."""

from __future__ import annotations

import json

import pytest

from apps.deployments import services
from apps.deployments.actions import ActionNotAllowed
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import Deployment, Event
from apps.deployments.services import Commit
from tests.factories import ImageAppFactory

pytestmark = pytest.mark.django_db
COMMIT = Commit("3f2a9c1d0e5b7a8c9d0e1f2a3b4c5d6e7f8a9b0c", "Fix checkout", "Alice <alice@example.com>")


def live(deployment: Deployment, image: str = "127.0.0.1:5000/shop@sha256:" + "a" * 64) -> Deployment:
    transition(deployment, to=Status.DEPLOYING, image=image)
    transition(deployment, to=Status.LIVE)
    return deployment


def test_deployments_are_numbered_per_app_and_become_current(shop, alice):
    first = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    second = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    other = services.deployment_create(app=ImageAppFactory(team=shop.team), trigger="manual", actor=alice)
    assert (first.number, second.number, other.number) == (1, 2, 1)
    shop.refresh_from_db()
    assert shop.current_deployment == second
    assert second.log_lines.first().text == "Deployment #2 created by alice (push)."


def test_the_pipeline_is_enqueued_only_after_commit(shop, alice, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    # one wake-up for the event stream (log line) and one to start the pipeline
    assert any("run_deployment" in repr(cb.__code__.co_names) for cb in callbacks)


def test_a_new_deployment_supersedes_pending_and_building_ones(shop, alice):
    first = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    second = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    transition(second, to=Status.BUILDING)
    third = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    first.refresh_from_db(), second.refresh_from_db()
    assert (first.status, first.stopped_reason) == ("stopped", "superseded by #2")
    assert (second.status, second.stopped_reason) == ("stopped", "superseded by #3")
    assert third.status == "pending"


def test_a_live_deployment_keeps_serving_until_the_new_one_is_live(shop, alice):
    first = live(services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT))
    second = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    first.refresh_from_db()
    assert first.status == "live"
    live(second)
    first.refresh_from_db()
    assert (first.status, first.stopped_reason) == ("stopped", "superseded by #2")


def test_cancel_stops_an_in_flight_deployment_naming_who(shop, alice):
    deployment = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    assert services.deployment_cancel(deployment=deployment, actor=alice) is True
    assert (deployment.status, deployment.stopped_reason) == ("stopped", "cancelled by alice")
    assert services.deployment_cancel(deployment=deployment, actor=alice) is False


def test_redeploy_reuses_the_record_and_logs_who_asked(shop, alice):
    deployment = live(services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT))
    shop.refresh_from_db()
    again = services.deployment_redeploy(app=shop, actor=alice)
    assert again.pk == deployment.pk and again.status == "deploying"
    assert Deployment.objects.filter(app=shop).count() == 1
    assert "Redeploy requested by alice at" in again.log_lines.last().text


def test_redeploy_is_refused_while_building(shop, alice):
    deployment = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    transition(deployment, to=Status.BUILDING)
    shop.refresh_from_db()
    with pytest.raises(ActionNotAllowed, match="while the app's current deployment is building"):
        services.deployment_redeploy(app=shop, actor=alice)


def test_rollback_creates_a_record_with_the_old_image_and_settings(shop, alice):
    services.env_var_set(app=shop, name="COLOR", value="blue")
    first = live(services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT))
    services.env_var_set(app=shop, name="COLOR", value="green")
    live(
        services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT),
        image="127.0.0.1:5000/shop@sha256:" + "b" * 64,
    )
    shop.refresh_from_db()
    back = services.deployment_rollback(app=shop, target=first, actor=alice)
    assert back.number == 3 and back.trigger == "rollback" and back.rollback_of == first
    assert back.image == first.image
    assert json.loads(back.settings_snapshot)["env"] == {"COLOR": "blue"}


def test_stop_stops_live_and_in_flight_deployments_and_clears_health(shop, alice):
    first = live(services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT))
    type(shop).objects.filter(pk=shop.pk).update(health_state="unhealthy", health_reason="CrashLoopBackOff")
    second = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    shop.refresh_from_db()
    services.app_stop(app=shop, actor=alice)
    first.refresh_from_db(), second.refresh_from_db(), shop.refresh_from_db()
    assert (first.status, first.stopped_reason) == ("stopped", "stopped by alice")
    assert (second.status, second.stopped_reason) == ("stopped", "stopped by alice")
    assert (shop.health_state, shop.health_reason) == ("none", "")
    assert Event.objects.filter(app=shop, kind="health").last().to_value == "none"


def test_the_admin_actions_call_the_same_services(client, olivia, shop, alice):
    deployment = live(services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT))
    client.force_login(olivia)
    page = client.post(
        "/admin/deployments/app/", {"action": "redeploy", "index": "0", "_selected_action": [shop.pk]}, follow=True
    )
    assert b"Shop: redeploying." in page.content  # the admin capitalises messages
    deployment.refresh_from_db()
    assert deployment.status == "deploying" and "Redeploy requested by olivia" in deployment.log_lines.last().text
    page = client.post(
        "/admin/deployments/deployment/", {"action": "cancel", "index": "0", "_selected_action": [deployment.pk]}, follow=True
    )
    deployment.refresh_from_db()
    assert (deployment.status, deployment.stopped_reason) == ("stopped", "cancelled by olivia")


def test_the_admin_shows_a_deployments_log_and_history(client, olivia, shop, alice):
    deployment = live(services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT))
    client.force_login(olivia)
    page = client.get(f"/admin/deployments/deployment/{deployment.pk}/change/")
    assert b"Deployment #1 created by alice (push)." in page.content
    assert b"transition history" in page.content.lower()
    for query in ("?status__exact=live", "?app__source__exact=git", "?app__health_state__exact=none", "?q=shop"):
        assert client.get("/admin/deployments/deployment/" + query).status_code == 200
        assert (
            client.get(
                "/admin/deployments/app/"
                + query.replace("status__exact", "current_deployment__status__exact").replace("app__", "")
            ).status_code
            == 200
        )
