"""Real controllers react to the simulated kubelet: Deployments roll out, Jobs finish, logs stream."""

from __future__ import annotations

import threading

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim.testing import TIMEOUT, condition, create_pod, wait_pod
from kubesim.wait import wait_for

pytestmark = pytest.mark.cluster


def _deployment(name: str, image: str, *, replicas: int = 2, deadline: int = 600) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "progressDeadlineSeconds": deadline,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "web", "image": image}]},
            },
        },
    }


def _job(name: str, image: str, *, backoff_limit: int = 0) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "build", "image": image}]}},
        },
    }


def test_a_deployment_rolls_out_to_a_new_replicaset(kube_api_client, kube_namespace):
    apps = client.AppsV1Api(kube_api_client)
    apps.create_namespaced_deployment(kube_namespace, _deployment("web", "web:v1"), _request_timeout=TIMEOUT)

    def available(generation: int) -> bool:
        d = apps.read_namespaced_deployment("web", kube_namespace, _request_timeout=TIMEOUT)
        s = d.status
        return (
            (s.observed_generation or 0) >= generation
            and s.updated_replicas == 2
            and s.available_replicas == 2
            and (s.replicas or 0) == 2
        )

    wait_for(lambda: available(1), timeout=30, message="web:v1 to be available")
    patched = apps.patch_namespaced_deployment(
        "web",
        kube_namespace,
        {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:v2"}]}}}},
        _request_timeout=TIMEOUT,
    )

    wait_for(lambda: available(patched.metadata.generation), timeout=30, message="web:v2 to be available")
    sets = apps.list_namespaced_replica_set(kube_namespace, _request_timeout=TIMEOUT).items
    by_image = {rs.spec.template.spec.containers[0].image: rs for rs in sets}
    assert by_image["web:v2"].status.ready_replicas == 2
    assert by_image["web:v1"].spec.replicas == 0


def test_a_crash_looping_rollout_exceeds_its_progress_deadline(kube_api_client, kube_namespace, behaviours):
    behaviours.set("crash", match={"image": "broken:*"}, behaviour={"type": "crash", "after": 0.2, "backoff": 0.5})
    apps = client.AppsV1Api(kube_api_client)
    apps.create_namespaced_deployment(
        kube_namespace, _deployment("api", "broken:1", replicas=1, deadline=2), _request_timeout=TIMEOUT
    )

    def deadline_exceeded() -> bool:
        d = apps.read_namespaced_deployment("api", kube_namespace, _request_timeout=TIMEOUT)
        cond = condition(d, "Progressing")
        return bool(cond and cond.status == "False" and cond.reason == "ProgressDeadlineExceeded")

    wait_for(deadline_exceeded, timeout=30, message="ProgressDeadlineExceeded")


def test_a_job_completes(kube_api_client, kube_namespace, behaviours):
    behaviours.set("build", match={"image": "builder:*"}, behaviour={"type": "exit", "duration": 0.2, "log_lines": ["built"]})
    batch = client.BatchV1Api(kube_api_client)
    batch.create_namespaced_job(kube_namespace, _job("ok", "builder:1"), _request_timeout=TIMEOUT)

    def complete() -> bool:
        job = batch.read_namespaced_job("ok", kube_namespace, _request_timeout=TIMEOUT)
        cond = condition(job, "Complete")
        return bool(cond and cond.status == "True")

    wait_for(complete, timeout=30, message="the Job to complete")
    job = batch.read_namespaced_job("ok", kube_namespace, _request_timeout=TIMEOUT)
    assert job.status.succeeded == 1


def test_a_job_fails_without_retries(kube_api_client, kube_namespace, behaviours):
    behaviours.set(
        "fail",
        match={"image": "builder:*"},
        behaviour={"type": "exit", "duration": 0.2, "exit_code": 2, "message": "build failed"},
    )
    batch = client.BatchV1Api(kube_api_client)
    batch.create_namespaced_job(kube_namespace, _job("bad", "builder:1", backoff_limit=0), _request_timeout=TIMEOUT)

    def failed() -> client.V1JobCondition | None:
        job = batch.read_namespaced_job("bad", kube_namespace, _request_timeout=TIMEOUT)
        cond = condition(job, "Failed")
        return cond if cond and cond.status == "True" else None

    cond = wait_for(failed, timeout=30, message="the Job to fail")
    assert cond.reason == "BackoffLimitExceeded"
    pods = (
        client.CoreV1Api(kube_api_client)
        .list_namespaced_pod(kube_namespace, label_selector="job-name=bad", _request_timeout=TIMEOUT)
        .items
    )
    term = pods[0].status.container_statuses[0].state.terminated
    assert (pods[0].status.phase, term.exit_code, term.message) == ("Failed", 2, "build failed")


def test_pod_logs_stream_with_follow(kube_api_client, kube_namespace, behaviours):
    behaviours.set(
        "talk",
        match={"image": "talker:*"},
        behaviour={"type": "healthy", "log_lines": ["hello"], "log_every": 0.05, "log_line": "tick {n}"},
    )
    create_pod(
        kube_api_client,
        kube_namespace,
        {
            "metadata": {"name": "talker"},
            "spec": {"containers": [{"name": "app", "image": "talker:1"}], "terminationGracePeriodSeconds": 1},
        },
    )
    wait_pod(kube_api_client, kube_namespace, "talker", lambda p: p.status.phase == "Running")
    core = client.CoreV1Api(kube_api_client)

    resp = core.read_namespaced_pod_log(
        "talker", kube_namespace, container="app", follow=True, _preload_content=False, _request_timeout=(5, 10)
    )
    lines: list[str] = []
    # A watchdog bounds the test even if the stream stalled.
    timer = threading.Timer(15, resp.close)
    timer.start()
    try:
        for raw in resp.stream(64):
            lines.extend(raw.decode().splitlines())
            if sum(1 for ln in lines if ln.startswith("tick")) >= 5:
                break
    finally:
        timer.cancel()
        resp.close()

    assert lines[0] == "hello"
    assert [ln for ln in lines if ln.startswith("tick")][:5] == [f"tick {n}" for n in range(1, 6)]
    tail = core.read_namespaced_pod_log("talker", kube_namespace, tail_lines=2, timestamps=True, _request_timeout=TIMEOUT)
    stamps, texts = zip(*(line.split(" ", 1) for line in tail.splitlines()), strict=True)
    assert len(texts) == 2 and all(t.startswith("tick") for t in texts)
    assert all(s.endswith("Z") and len(s) == len("2024-01-01T00:00:00.000000000Z") for s in stamps)
    with pytest.raises(ApiException) as no_previous:
        core.read_namespaced_pod_log("talker", kube_namespace, previous=True, _request_timeout=TIMEOUT)
    assert no_previous.value.status == 400

    def ticks() -> int:
        return core.read_namespaced_pod_log("talker", kube_namespace, _request_timeout=TIMEOUT).count("tick")

    wait_for(lambda: ticks() >= 40, timeout=15, message="2 s of ticks")  # "hello" is now > 1 s old
    recent = core.read_namespaced_pod_log("talker", kube_namespace, since_seconds=1, _request_timeout=TIMEOUT)
    assert "hello" not in recent and "tick" in recent


def test_a_finished_job_is_deleted_after_its_ttl(kube_api_client, kube_namespace, behaviours):
    behaviours.set("build", match={"image": "builder:*"}, behaviour={"type": "exit", "duration": 0.1})
    batch = client.BatchV1Api(kube_api_client)
    body = _job("short-lived", "builder:1")
    body["spec"]["ttlSecondsAfterFinished"] = 1
    batch.create_namespaced_job(kube_namespace, body, _request_timeout=TIMEOUT)

    def gone() -> bool:
        return not batch.list_namespaced_job(kube_namespace, _request_timeout=TIMEOUT).items

    wait_for(gone, timeout=30, message="the TTL controller to delete the finished Job")
