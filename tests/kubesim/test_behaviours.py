"""Each simulated behaviour shows its documented pod state through the real API."""

from __future__ import annotations

import re

import pytest
from kubernetes import client

from kubesim.behaviours import fake_digest
from kubesim.testing import (
    TIMEOUT,
    condition,
    container_status,
    create_pod,
    pod_body,
    read_pod,
    wait_pod,
    waiting_reason,
)
from kubesim.wait import wait_for

pytestmark = pytest.mark.cluster


def test_crash_loops_with_back_off_and_keeps_the_last_termination(kube_api_client, kube_namespace, behaviours):
    behaviours.set(
        "crash",
        match={"image": "app:*"},
        behaviour={"type": "crash", "after": 0.1, "exit_code": 3, "backoff": 0.3, "log_lines": ["starting", "boom"]},
    )
    create_pod(kube_api_client, kube_namespace, pod_body("web"))

    pod = wait_pod(kube_api_client, kube_namespace, "web", lambda p: waiting_reason(p) == "CrashLoopBackOff")

    st = container_status(pod)
    assert pod.status.phase == "Running"
    assert st.ready is False and st.restart_count >= 1
    # The first back-off is 300ms; a slow poll may first see the doubled one.
    pattern = rf"back-off (300|600)ms restarting failed container=app pod=web_{kube_namespace}\({pod.metadata.uid}\)"
    assert re.fullmatch(pattern, st.state.waiting.message)
    last = st.last_state.terminated
    assert (last.reason, last.exit_code) == ("Error", 3)
    assert last.finished_at is not None
    previous = client.CoreV1Api(kube_api_client).read_namespaced_pod_log(
        "web", kube_namespace, previous=True, _request_timeout=TIMEOUT
    )
    assert previous.splitlines() == ["starting", "boom"]
    assert condition(pod, "Ready").status == "False"

    # The back-off doubles (0.3 s, 0.6 s, ...) and the restarts go on.
    wait_pod(kube_api_client, kube_namespace, "web", lambda p: container_status(p).restart_count >= 3)


def test_oom_kills_with_137(kube_api_client, kube_namespace, behaviours):
    behaviours.set("oom", match={"image": "app:*"}, behaviour={"type": "oom", "after": 0.1, "backoff": 0.5})
    create_pod(kube_api_client, kube_namespace, pod_body("hungry"))

    pod = wait_pod(
        kube_api_client, kube_namespace, "hungry", lambda p: container_status(p) and container_status(p).last_state.terminated
    )

    last = container_status(pod).last_state.terminated
    assert (last.reason, last.exit_code) == ("OOMKilled", 137)


def test_image_pull_errors_alternate_and_the_pod_stays_pending(kube_api_client, kube_namespace, behaviours):
    behaviours.set("pull", match={"image": "ghost/*"}, behaviour={"type": "pull_error", "err_for": 0.3, "backoff": 0.3})
    create_pod(kube_api_client, kube_namespace, pod_body("ghost", "ghost/app:v9"))

    pod = wait_pod(kube_api_client, kube_namespace, "ghost", lambda p: waiting_reason(p) == "ErrImagePull")
    assert 'failed to pull and unpack image "docker.io/ghost/app:v9"' in container_status(pod).state.waiting.message
    pod = wait_pod(kube_api_client, kube_namespace, "ghost", lambda p: waiting_reason(p) == "ImagePullBackOff")
    assert container_status(pod).state.waiting.message == 'Back-off pulling image "ghost/app:v9"'
    assert pod.status.phase == "Pending"
    wait_pod(kube_api_client, kube_namespace, "ghost", lambda p: waiting_reason(p) == "ErrImagePull")
    assert read_pod(kube_api_client, kube_namespace, "ghost").status.phase == "Pending"


def test_an_invalid_image_name_is_reported(kube_api_client, kube_namespace, behaviours):
    behaviours.set("bad", match={"image": "Bad*"}, behaviour="invalid_image")
    create_pod(kube_api_client, kube_namespace, pod_body("bad", "BadName"))

    pod = wait_pod(kube_api_client, kube_namespace, "bad", lambda p: waiting_reason(p) == "InvalidImageName")
    assert pod.status.phase == "Pending"


def test_a_missing_secret_key_is_a_create_container_config_error(kube_api_client, kube_namespace):
    core = client.CoreV1Api(kube_api_client)
    core.create_namespaced_secret(
        kube_namespace, {"metadata": {"name": "db"}, "stringData": {"url": "postgres://x"}}, _request_timeout=TIMEOUT
    )
    body = pod_body("cfg")
    body["spec"]["containers"][0]["env"] = [
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}
    ]
    create_pod(kube_api_client, kube_namespace, body)

    pod = wait_pod(kube_api_client, kube_namespace, "cfg", lambda p: waiting_reason(p) == "CreateContainerConfigError")
    assert container_status(pod).state.waiting.message == f"couldn't find key password in Secret {kube_namespace}/db"

    core.patch_namespaced_secret("db", kube_namespace, {"stringData": {"password": "s3cret"}}, _request_timeout=TIMEOUT)
    wait_pod(kube_api_client, kube_namespace, "cfg", lambda p: p.status.phase == "Running")


def test_config_create_and_run_errors_can_be_forced(kube_api_client, kube_namespace, behaviours):
    behaviours.set("cfg", match={"image": "cfg:*"}, behaviour={"type": "config_error", "message": 'secret "x" not found'})
    behaviours.set("create", match={"image": "create:*"}, behaviour="create_error")
    behaviours.set("run", match={"image": "run:*"}, behaviour={"type": "run_error", "backoff": 0.2})
    for name in ("cfg", "create", "run"):
        create_pod(kube_api_client, kube_namespace, pod_body(name, f"{name}:1"))

    cfg = wait_pod(kube_api_client, kube_namespace, "cfg", lambda p: waiting_reason(p) == "CreateContainerConfigError")
    assert container_status(cfg).state.waiting.message == 'secret "x" not found'
    wait_pod(kube_api_client, kube_namespace, "create", lambda p: waiting_reason(p) == "CreateContainerError")
    run = wait_pod(kube_api_client, kube_namespace, "run", lambda p: waiting_reason(p) == "RunContainerError")
    assert container_status(run).last_state.terminated.reason == "StartError"


def test_never_ready_runs_without_becoming_ready(kube_api_client, kube_namespace, behaviours):
    behaviours.set("nr", match={"image": "app:*"}, behaviour={"type": "never_ready", "start_delay": 0})
    create_pod(kube_api_client, kube_namespace, pod_body("stuck"))

    pod = wait_pod(kube_api_client, kube_namespace, "stuck", lambda p: p.status.phase == "Running")

    assert container_status(pod).ready is False
    assert condition(pod, "ContainersReady").reason == "ContainersNotReady"
    assert condition(pod, "Ready").message == "containers with unready status: [app]"


def test_slow_start_becomes_ready_late(kube_api_client, kube_namespace, behaviours):
    behaviours.set("slow", match={"image": "app:*"}, behaviour={"type": "slow_start", "ready_after": 2.0})
    create_pod(kube_api_client, kube_namespace, pod_body("slow"))

    pod = wait_pod(kube_api_client, kube_namespace, "slow", lambda p: p.status.phase == "Running")
    assert container_status(pod).ready is False
    wait_pod(kube_api_client, kube_namespace, "slow", lambda p: container_status(p).ready)


def test_flap_is_healthy_then_crash_loops_then_recovers(kube_api_client, kube_namespace, behaviours):
    behaviours.set(
        "flap",
        match={"image": "app:*"},
        behaviour={"type": "flap", "healthy_for": 1.5, "crash_for": 1.5, "after": 0.1, "backoff": 0.2, "start_delay": 0},
    )
    create_pod(kube_api_client, kube_namespace, pod_body("flappy"))

    wait_pod(kube_api_client, kube_namespace, "flappy", lambda p: container_status(p) and container_status(p).ready)
    wait_pod(kube_api_client, kube_namespace, "flappy", lambda p: waiting_reason(p) == "CrashLoopBackOff")
    pod = wait_pod(
        kube_api_client,
        kube_namespace,
        "flappy",
        lambda p: container_status(p).ready and container_status(p).restart_count >= 2,
        timeout=20,
    )
    assert condition(pod, "Ready").status == "True"


def test_exit_writes_a_termination_message_with_a_digest(kube_api_client, kube_namespace, behaviours):
    behaviours.set(
        "build",
        match={"env": {"APP": "shop"}},
        behaviour={"type": "exit", "duration": 0.1, "message": "pushed {env:APP}@{digest}", "log_lines": ["step 1/2"]},
    )
    create_pod(kube_api_client, kube_namespace, pod_body("build", "builder:1", restart="Never", env={"APP": "shop"}))

    pod = wait_pod(kube_api_client, kube_namespace, "build", lambda p: p.status.phase == "Succeeded")

    term = container_status(pod).state.terminated
    assert term.exit_code == 0 and term.reason == "Completed"
    assert term.message == f"pushed shop@{fake_digest('builder:1', {'APP': 'shop'})}"
    assert condition(pod, "Ready").reason == "PodCompleted"


def test_a_live_rule_change_applies_to_running_pods(kube_api_client, kube_namespace, behaviours):
    behaviours.set("live", match={"image": "app:*"}, behaviour={"type": "never_ready", "start_delay": 0})
    create_pod(kube_api_client, kube_namespace, pod_body("live"))
    wait_pod(kube_api_client, kube_namespace, "live", lambda p: p.status.phase == "Running")

    behaviours.set("live", match={"image": "app:*"}, behaviour={"type": "healthy"})

    wait_pod(kube_api_client, kube_namespace, "live", lambda p: container_status(p).ready)


def test_init_containers_run_in_order_before_the_main_ones(kube_api_client, kube_namespace, behaviours):
    behaviours.set("init", match={"init": True}, behaviour={"type": "exit", "duration": 0.8, "start_delay": 0})
    body = pod_body("inits")
    body["spec"]["initContainers"] = [{"name": "one", "image": "init:1"}, {"name": "two", "image": "init:1"}]
    create_pod(kube_api_client, kube_namespace, body)

    pod = wait_pod(
        kube_api_client,
        kube_namespace,
        "inits",
        lambda p: container_status(p, "one", init=True) and container_status(p, "one", init=True).state.running,
    )
    assert container_status(pod, "two", init=True).state.waiting.reason == "PodInitializing"
    assert waiting_reason(pod) == "PodInitializing"
    assert condition(pod, "Initialized").status == "False"

    pod = wait_pod(kube_api_client, kube_namespace, "inits", lambda p: p.status.phase == "Running" and container_status(p).ready)
    one = container_status(pod, "one", init=True).state.terminated
    two = container_status(pod, "two", init=True).state.terminated
    assert one.reason == two.reason == "Completed"
    assert one.finished_at <= two.started_at
    assert condition(pod, "Initialized").status == "True"


def test_pods_get_unique_ips_and_the_node_address(kube_api_client, kube_namespace):
    for name in ("a", "b"):
        create_pod(kube_api_client, kube_namespace, pod_body(name))

    pods = [wait_pod(kube_api_client, kube_namespace, n, lambda p: p.status.pod_ip) for n in ("a", "b")]

    assert pods[0].status.pod_ip != pods[1].status.pod_ip
    assert all(p.status.pod_ip.startswith("10.244.") for p in pods)
    assert all(p.status.host_ip == "127.0.0.1" and p.status.start_time for p in pods)


def test_the_kubelet_finishes_a_graceful_pod_deletion(kube_api_client, kube_namespace):
    core = client.CoreV1Api(kube_api_client)
    create_pod(kube_api_client, kube_namespace, pod_body("doomed"))
    wait_pod(kube_api_client, kube_namespace, "doomed", lambda p: p.status.phase == "Running")

    core.delete_namespaced_pod("doomed", kube_namespace, _request_timeout=TIMEOUT)

    def gone() -> bool:
        names = [p.metadata.name for p in core.list_namespaced_pod(kube_namespace, _request_timeout=TIMEOUT).items]
        return "doomed" not in names

    wait_for(gone, timeout=10, message="the kubelet to finish the graceful deletion")


def test_the_kubelet_records_events_a_person_would_read(kube_api_client, kube_namespace, behaviours):
    behaviours.set("crash", match={"image": "app:*"}, behaviour={"type": "crash", "after": 0.1, "backoff": 0.2})
    create_pod(kube_api_client, kube_namespace, pod_body("noisy"))
    core = client.CoreV1Api(kube_api_client)

    def reasons() -> set[str]:
        events = core.list_namespaced_event(kube_namespace, _request_timeout=TIMEOUT).items
        return {e.reason for e in events if e.involved_object.name == "noisy"}

    seen = wait_for(
        lambda: reasons() >= {"Scheduled", "Created", "Started", "BackOff"} and reasons(),
        timeout=20,
        message="Scheduled, Created, Started and BackOff events",
    )
    assert "Pulled" in seen


def test_on_failure_restarts_only_failed_containers(kube_api_client, kube_namespace, behaviours):
    behaviours.set(
        "fails", match={"image": "flaky:*"}, behaviour={"type": "exit", "duration": 0.1, "exit_code": 1, "backoff": 0.2}
    )
    behaviours.set("works", match={"image": "fine:*"}, behaviour={"type": "exit", "duration": 0.1})
    create_pod(kube_api_client, kube_namespace, pod_body("flaky", "flaky:1", restart="OnFailure"))
    create_pod(kube_api_client, kube_namespace, pod_body("fine", "fine:1", restart="OnFailure"))

    pod = wait_pod(
        kube_api_client, kube_namespace, "flaky", lambda p: container_status(p) and container_status(p).restart_count >= 2
    )
    assert pod.status.phase == "Running"
    assert container_status(pod).last_state.terminated.exit_code == 1
    fine = wait_pod(kube_api_client, kube_namespace, "fine", lambda p: p.status.phase == "Succeeded")
    assert container_status(fine).restart_count == 0
