"""Deploy actions end to end: Redeploy, Stop, Rollback, and a controller killed mid-rollout."""

from __future__ import annotations

import json

import pytest

from apps.deployments import pipeline, services
from apps.deployments.models import Deployment
from builder import specs
from tests.e2e.test_rollouts import IMAGE, behave, health_is, settled
from tests.factories import ImageAppFactory
from tests.support.live import unique_name, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.cluster]
OTHER_IMAGE = "127.0.0.1:5000/demo@sha256:" + "d" * 64


@pytest.fixture
def demo(slipway_stack, acme, alice):
    return ImageAppFactory(name=unique_name("demo"), team=acme, created_by=alice, image_url="127.0.0.1:5000/demo", port=8080)


def pods(app) -> list[dict]:
    items = pipeline.cluster().list("Pod", app.namespace, selector=specs.selector(app=app.name, component="app"))["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def k8s_deployment(app) -> dict | None:
    return pipeline.cluster().get("Deployment", app.name, app.namespace)


def test_redeploy_after_an_env_change_rolls_the_pods_with_the_new_value(demo, alice, behaviours):
    behave(behaviours, demo, "healthy")
    services.env_var_set(app=demo, name="COLOR", value="blue")
    deployment = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE))
    assert deployment.status == "live"
    before = {p["metadata"]["name"] for p in pods(demo)}
    services.env_var_set(app=demo, name="COLOR", value="green")
    demo.refresh_from_db()
    again = services.deployment_redeploy(app=demo, actor=alice)
    assert again.pk == deployment.pk
    again = settled(again)
    assert again.status == "live", again.error
    assert Deployment.objects.filter(app=demo).count() == 1
    secret = pipeline.cluster().get("Secret", f"{demo.name}-env", demo.namespace) or {}
    assert secret, "the app's env Secret exists"
    after = {p["metadata"]["name"] for p in pods(demo)}
    assert after and not (after & before), "the pods were replaced"
    assert json.loads(again.settings_snapshot)["env"] == {"COLOR": "green"}
    assert any("Redeploy requested by alice" in t for t in again.log_lines.values_list("text", flat=True))


def test_stop_tears_down_then_redeploy_starts_again(demo, alice, behaviours):
    behave(behaviours, demo, "healthy")
    deployment = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE))
    health_is(demo, "healthy")
    demo.refresh_from_db()
    services.app_stop(app=demo, actor=alice)
    deployment.refresh_from_db()
    assert (deployment.status, deployment.stopped_reason) == ("stopped", "stopped by alice")
    wait_until(lambda: k8s_deployment(demo) is None, timeout=30, message="the workload to be deleted")
    health_is(demo, "none")
    demo.refresh_from_db()
    assert settled(services.deployment_redeploy(app=demo, actor=alice)).status == "live"
    assert k8s_deployment(demo) is not None


def test_rollback_serves_the_earlier_image_with_its_settings(demo, alice, behaviours):
    behave(behaviours, demo, "healthy")
    services.env_var_set(app=demo, name="COLOR", value="blue")
    first = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE))
    services.env_var_set(app=demo, name="COLOR", value="green")
    second = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=OTHER_IMAGE))
    assert second.status == "live"
    demo.refresh_from_db()
    back = settled(services.deployment_rollback(app=demo, target=first, actor=alice))
    assert back.status == "live", back.error
    second.refresh_from_db()
    assert (second.status, second.stopped_reason) == ("stopped", f"superseded by #{back.number}")
    container = k8s_deployment(demo)["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == IMAGE
    assert json.loads(back.settings_snapshot)["env"] == {"COLOR": "blue"}


def test_a_failed_rollout_leaves_the_previous_deployment_serving(demo, alice, behaviours):
    behave(behaviours, demo, "healthy")
    first = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE))
    behave(behaviours, demo, "crash", after=0.3, exit_code=2, backoff=0.5)
    second = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=OTHER_IMAGE))
    assert second.status == "failed"
    first.refresh_from_db()
    assert first.status == "live"
    assert any(p["status"].get("phase") == "Running" and p["spec"]["containers"][0]["image"] == IMAGE for p in pods(demo))
    # and the failed version is taken out of the workload, so it stops crash-looping beside it
    wait_until(lambda: deployed_image(demo) == IMAGE, timeout=30, message="the serving image to be applied again")


def test_a_controller_killed_mid_rollout_reaches_the_truth_after_restart(demo, alice, behaviours, slipway_stack):
    behave(behaviours, demo, "slow_start", ready_after=4.0)
    deployment = services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE)
    wait_until(
        lambda: Deployment.objects.get(pk=deployment.pk).rollout_generation, timeout=30, message="the manifests to be applied"
    )
    slipway_stack.processes["controller"].kill()
    wait_until(
        lambda: any(
            p["status"].get("conditions") and all(c["status"] == "True" for c in p["status"]["conditions"]) for p in pods(demo)
        ),
        timeout=30,
        message="the pod to become ready while no controller runs",
    )
    deployment.refresh_from_db()
    assert deployment.status == "deploying"
    slipway_stack.restart("controller")
    assert settled(deployment, timeout=60).status == "live"


def test_a_redeploy_right_after_stop_is_not_undone_by_the_teardown(demo, alice, behaviours, slipway_stack):
    behave(behaviours, demo, "healthy")
    settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE))
    demo.refresh_from_db()
    slipway_stack.processes["worker"].kill()  # the teardown waits in the queue, ahead of the redeploy
    services.app_stop(app=demo, actor=alice)
    demo.refresh_from_db()
    again = services.deployment_redeploy(app=demo, actor=alice)
    slipway_stack.restart("worker")
    assert settled(again).status == "live", again.error
    assert k8s_deployment(demo) is not None


def deployed_image(app) -> str | None:
    k8s = k8s_deployment(app)
    return k8s["spec"]["template"]["spec"]["containers"][0]["image"] if k8s else None


def test_cancelling_a_rollout_puts_the_serving_version_back(demo, alice, behaviours):
    behave(behaviours, demo, "healthy")
    first = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE))
    behave(behaviours, demo, "slow_start", ready_after=120.0)
    second = services.deployment_create(app=demo, trigger="manual", actor=alice, image=OTHER_IMAGE)
    wait_until(
        lambda: Deployment.objects.get(pk=second.pk).rollout_generation, timeout=30, message="the new manifests to be applied"
    )
    second.refresh_from_db()
    assert services.deployment_cancel(deployment=second, actor=alice)
    wait_until(lambda: deployed_image(demo) == IMAGE, timeout=30, message="the serving image to be applied again")
    first.refresh_from_db()
    assert first.status == "live"
    assert any("Re-applied #1" in t for t in first.log_lines.values_list("text", flat=True))


def test_a_newer_rollout_supersedes_one_still_in_progress(demo, alice, behaviours):
    slow = {"type": "slow_start", "start_delay": 0.2, "ready_after": 120.0}
    behaviours.set(f"{demo.name}-old", match={"namespace": demo.namespace, "image": IMAGE}, behaviour=slow, priority=1)
    behaviours.set(
        f"{demo.name}-new",
        match={"namespace": demo.namespace, "image": OTHER_IMAGE},
        behaviour={"type": "healthy", "start_delay": 0.2, "ready_after": 0.3},
        priority=1,
    )
    older = services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE)
    wait_until(
        lambda: Deployment.objects.get(pk=older.pk).rollout_generation, timeout=30, message="the first manifests to be applied"
    )
    newer = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=OTHER_IMAGE))
    older.refresh_from_db()
    assert newer.status == "live", newer.error
    assert (older.status, older.stopped_reason, older.live_at) == ("stopped", f"superseded by #{newer.number}", None)
