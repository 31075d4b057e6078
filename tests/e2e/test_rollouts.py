"""Rollouts on the local cluster, end to end: worker, controller and a real API server.

Each test asserts the exact status, health and message a person would see.
"""

from __future__ import annotations

import pytest

from apps.deployments import services
from apps.deployments.models import App, Deployment
from tests.factories import ImageAppFactory
from tests.support.live import unique_name, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.cluster]

IMAGE = "127.0.0.1:5000/demo@sha256:" + "c" * 64
FAST = {"start_delay": 0.2, "ready_after": 0.3}


@pytest.fixture
def demo(slipway_stack, acme, alice):
    """alice's image app, with a name no earlier test used on the cluster."""
    return ImageAppFactory(name=unique_name("demo"), team=acme, created_by=alice, image_url="127.0.0.1:5000/demo", port=8080)


def behave(behaviours, app: App, name: str, **fields):
    behaviours.set(f"{app.name}-{name}", match={"namespace": app.namespace}, behaviour={"type": name, **FAST, **fields})


def settled(deployment: Deployment, *, timeout: float = 60) -> Deployment:
    def done():
        deployment.refresh_from_db()
        return deployment.status in ("live", "failed", "stopped")

    try:
        wait_until(done, timeout=timeout, message=f"{deployment} to settle")
    except pytest.fail.Exception:
        log = "\n".join(f"[{s}] {t}" for s, t in deployment.log_lines.order_by("seq").values_list("step", "text"))
        pytest.fail(f"{deployment} is still {deployment.status}; its log:\n{log}")
    return deployment


def health_is(app: App, state: str, reason: str = "", *, timeout: float = 60) -> None:
    def check():
        app.refresh_from_db()
        return (app.health_state, app.health_reason) == (state, reason)

    wait_until(check, timeout=timeout, message=f"{app.name} health to be {state} {reason!r}")


def test_a_healthy_image_rolls_out_to_live(demo, alice, behaviours):
    behave(behaviours, demo, "healthy")
    deployment = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE))
    assert deployment.status == "live", deployment.error
    assert deployment.deploying_at <= deployment.live_at
    texts = list(deployment.log_lines.values_list("text", flat=True))
    assert "Rollout complete: 1 of 1 pod(s) ready." in texts
    health_is(demo, "healthy")


@pytest.mark.parametrize(
    ("behaviour", "fields", "reason"),
    [
        # ErrImagePull turns into ImagePullBackOff within moments; the controller may see either first.
        ("pull_error", {}, ("ErrImagePull", "ImagePullBackOff")),
        ("invalid_image", {}, "InvalidImageName"),
        ("config_error", {"message": 'secret "demo-env" not found'}, "CreateContainerConfigError"),
        ("create_error", {}, "CreateContainerError"),
        ("run_error", {}, "RunContainerError"),
        ("crash", {"after": 0.3, "exit_code": 3, "backoff": 0.5}, "Error (exit 3)"),
        ("oom", {"after": 0.3, "backoff": 0.5}, "OOMKilled (exit 137)"),
    ],
)
def test_each_member_of_the_failure_set_fails_the_rollout_with_its_reason(demo, alice, behaviours, behaviour, fields, reason):
    behave(behaviours, demo, behaviour, **fields)
    deployment = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE))
    assert deployment.status == "failed"
    assert deployment.error.startswith(reason if isinstance(reason, tuple) else (reason,)), deployment.error
    demo.refresh_from_db()
    assert demo.health_state == "none"  # never live: no runtime indicator


def test_a_crash_keeps_the_last_log_lines_as_context_with_secrets_masked(demo, alice, behaviours):
    services.env_var_set(app=demo, name="API_KEY", value="sk_live_0123456789", secret=True)
    lines = ["booting with key sk_live_0123456789", "KeyError: 'DATABASE_URL'"]
    behave(behaviours, demo, "crash", after=0.3, exit_code=1, backoff=0.5, log_lines=lines)
    deployment = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE))
    assert deployment.status == "failed"
    assert "Last log lines:" in deployment.error and "KeyError: 'DATABASE_URL'" in deployment.error
    assert "booting with key ********" in deployment.error and "sk_live_0123456789" not in deployment.error


def test_readiness_that_never_passes_fails_at_the_progress_deadline(demo, alice, behaviours):
    behave(behaviours, demo, "never_ready")
    deployment = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE), timeout=90)
    assert deployment.status == "failed"
    assert deployment.error.startswith("ProgressDeadlineExceeded: the rollout did not finish within 20 s")


def test_an_app_that_crashes_after_going_live_shows_then_clears_crash_loop(demo, alice, behaviours):
    behave(behaviours, demo, "flap", healthy_for=2.0, crash_for=6.0, after=0.2, backoff=0.5)
    deployment = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE))
    assert deployment.status == "live"
    health_is(demo, "unhealthy", "CrashLoopBackOff")
    deployment.refresh_from_db()
    assert deployment.status == "live"  # health never changes the status
    # Recovered once the container has stayed up for health.RECOVERED_AFTER.
    health_is(demo, "healthy", timeout=120)


def test_an_oom_after_going_live_shows_oomkilled_exit_137(demo, alice, behaviours):
    behave(behaviours, demo, "healthy")
    deployment = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE))
    assert deployment.status == "live"
    behave(behaviours, demo, "oom", after=0.5, backoff=0.5)
    from apps.deployments import pipeline
    from builder import specs

    # The new behaviour applies to new containers: delete the pod so its replacement runs it.
    kube = pipeline.cluster()
    for pod in kube.list("Pod", demo.namespace, selector=specs.selector(app=demo.name))["items"]:
        kube.delete("Pod", pod["metadata"]["name"], demo.namespace)
    health_is(demo, "unhealthy", "OOMKilled (exit 137)")


def app_pods(app: App) -> list[dict]:
    from apps.deployments import pipeline
    from builder import specs

    items = pipeline.cluster().list("Pod", app.namespace, selector=specs.selector(app=app.name, component="app"))["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def test_a_pod_that_runs_but_stops_passing_readiness_is_running_and_unhealthy(demo, alice, behaviours):
    from apps.deployments import pipeline

    behave(behaviours, demo, "healthy")
    assert settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE)).status == "live"
    behave(behaviours, demo, "never_ready")
    for pod in app_pods(demo):
        pipeline.cluster().delete("Pod", pod["metadata"]["name"], demo.namespace)
    health_is(demo, "unhealthy", "readiness probe failing")

    def running_and_unhealthy():
        demo.refresh_from_db()
        return [p["status"]["phase"] for p in app_pods(demo)] == ["Running"] and demo.health_reason == "readiness probe failing"

    wait_until(running_and_unhealthy, timeout=30, message="the replacement pod to run while its health says readiness fails")


def test_an_app_whose_pods_vanish_shows_no_running_pods(demo, alice, behaviours):
    from apps.deployments import pipeline

    behave(behaviours, demo, "healthy")
    deployment = settled(services.deployment_create(app=demo, trigger="manual", actor=alice, image=IMAGE))
    health_is(demo, "healthy")
    # Someone deletes the workload behind Slipway's back: the app is live but nothing runs.
    pipeline.cluster().delete("Deployment", demo.name, demo.namespace)
    health_is(demo, "unhealthy", "no running pods")
    deployment.refresh_from_db()
    assert deployment.status == "live"
