"""Runtime health and pod phases from pods shaped exactly like the Kubernetes API's responses."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from kubernetes.client import ApiClient, V1Pod

from apps.deployments.health import FAILURE_PHASES, HealthState, PodPhase, classify, pod_phase

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
T_START = "2026-11-30T11:50:00Z"


def pod(
    phase="Running",
    *,
    ready=True,
    state=None,
    last_state=None,
    restarts=0,
    init=None,
    name="shop-7d9f8b6c5-x2k4p",
    deleting=False,
):
    """Return a pod as `GET /api/v1/namespaces/slipway-shop/pods/NAME` returns it."""
    state = state if state is not None else {"running": {"startedAt": T_START}}
    ready_s = "True" if ready else "False"
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "slipway-shop",
            "uid": "5b1c7a2e-9f7d-4c41-a1d2-0c6a0e4c9f11",
            "resourceVersion": "48213",
            "labels": {"slipway.dev/app": "shop", "slipway.dev/deployment": "3", "pod-template-hash": "7d9f8b6c5"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "shop-7d9f8b6c5",
                    "uid": "e1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [{"name": "app", "image": "127.0.0.1:5000/shop@sha256:" + "a" * 64}],
            "restartPolicy": "Always",
            "nodeName": "kubesim-node-1",
        },
        "status": {
            "phase": phase,
            "conditions": [
                {"type": "Initialized", "status": "True", "lastProbeTime": None, "lastTransitionTime": T_START},
                {"type": "Ready", "status": ready_s, "lastProbeTime": None, "lastTransitionTime": T_START},
                {"type": "ContainersReady", "status": ready_s, "lastProbeTime": None, "lastTransitionTime": T_START},
                {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": T_START},
            ],
            "hostIP": "127.0.0.1",
            "podIP": "10.244.0.17",
            "podIPs": [{"ip": "10.244.0.17"}],
            "startTime": T_START,
            "containerStatuses": [
                {
                    "name": "app",
                    "state": state,
                    "lastState": last_state or {},
                    "ready": ready,
                    "restartCount": restarts,
                    "image": "127.0.0.1:5000/shop@sha256:" + "a" * 64,
                    "imageID": "",
                    "containerID": "containerd://9d2f",
                    "started": "running" in state,
                }
            ],
            "qosClass": "Burstable",
        },
    }
    if init is not None:
        body["status"]["initContainerStatuses"] = init
    if deleting:
        body["metadata"]["deletionTimestamp"] = "2026-11-30T11:59:00Z"
    return body


CRASH_LOOP = pod(
    ready=False,
    state={
        "waiting": {
            "reason": "CrashLoopBackOff",
            "message": "back-off 40s restarting failed container=app pod=shop-7d9f8b6c5-x2k4p_slipway-shop(5b1c)",
        }
    },
    last_state={
        "terminated": {
            "exitCode": 1,
            "reason": "Error",
            "startedAt": "2026-11-30T11:58:40Z",
            "finishedAt": "2026-11-30T11:58:41Z",
            "containerID": "containerd://1",
        }
    },
    restarts=4,
)
OOM_LOOP = pod(
    ready=False,
    state={"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s restarting failed container=app"}},
    last_state={
        "terminated": {
            "exitCode": 137,
            "reason": "OOMKilled",
            "startedAt": "2026-11-30T11:58:40Z",
            "finishedAt": "2026-11-30T11:58:50Z",
        }
    },
    restarts=2,
)
OOM_NOW = pod(
    ready=False,
    state={
        "terminated": {
            "exitCode": 137,
            "reason": "OOMKilled",
            "startedAt": "2026-11-30T11:58:40Z",
            "finishedAt": "2026-11-30T11:59:50Z",
        }
    },
    restarts=1,
)
EXITED_3 = pod(ready=False, state={"terminated": {"exitCode": 3, "reason": "Error", "finishedAt": "2026-11-30T11:59:50Z"}})
ERR_IMAGE_PULL = pod(
    "Pending",
    ready=False,
    state={
        "waiting": {
            "reason": "ErrImagePull",
            "message": 'rpc error: code = NotFound desc = failed to pull and unpack image "127.0.0.1:5000/shop:v9": not found',
        }
    },
)
IMAGE_PULL_BACKOFF = pod(
    "Pending",
    ready=False,
    state={"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "127.0.0.1:5000/shop:v9"'}},
)
CONFIG_ERROR = pod(
    "Pending", ready=False, state={"waiting": {"reason": "CreateContainerConfigError", "message": 'secret "shop-env" not found'}}
)
RESTARTING = pod(
    state={"running": {"startedAt": "2026-11-30T11:59:50Z"}},
    last_state={"terminated": {"exitCode": 2, "reason": "Error", "finishedAt": "2026-11-30T11:59:29Z"}},
    restarts=5,
)
RESTARTED_LONG_AGO = pod(
    last_state={"terminated": {"exitCode": 2, "reason": "Error", "finishedAt": "2026-11-30T08:00:00Z"}}, restarts=5
)
NOT_READY = pod(ready=False)
HEALTHY_POD = pod()
STARTING = pod("Pending", ready=False, state={"waiting": {"reason": "ContainerCreating"}})


@pytest.mark.parametrize(
    ("pods", "reason"),
    [
        ([CRASH_LOOP], "CrashLoopBackOff"),
        ([IMAGE_PULL_BACKOFF], "ImagePullBackOff"),
        ([ERR_IMAGE_PULL], "ErrImagePull"),
        ([OOM_NOW], "OOMKilled (exit 137)"),
        ([OOM_LOOP], "OOMKilled (exit 137)"),
        ([EXITED_3], "Error (exit 3)"),
        ([RESTARTING], "restarting repeatedly"),
        ([NOT_READY], "readiness probe failing"),
        ([], "no running pods"),
        ([pod("Failed", ready=False, state={"terminated": {"exitCode": 0, "reason": "Completed"}})], "no running pods"),
        ([pod(deleting=True)], "no running pods"),
    ],
)
def test_each_reason_of_the_table_is_worded_exactly(pods, reason):
    assert classify(pods, serving=True, now=NOW) == (HealthState.UNHEALTHY, reason)


def test_a_healthy_app_shows_no_problem():
    health = classify([HEALTHY_POD, pod(name="shop-7d9f8b6c5-abcde")], serving=True, now=NOW)
    assert health.state == HealthState.HEALTHY and health.reason == ""


def test_no_indicator_while_the_deployment_has_not_gone_live():
    assert classify([], serving=False, now=NOW).state == HealthState.NONE
    assert classify([CRASH_LOOP], serving=False, now=NOW).state == HealthState.NONE


def test_old_restarts_are_not_restarting_repeatedly():
    assert classify([RESTARTED_LONG_AGO], serving=True, now=NOW).state == HealthState.HEALTHY


def test_a_container_that_stayed_up_since_its_last_restart_has_recovered():
    recovered = pod(
        state={"running": {"startedAt": "2026-11-30T11:59:00Z"}},
        last_state={"terminated": {"exitCode": 2, "reason": "Error", "finishedAt": "2026-11-30T11:58:59Z"}},
        restarts=5,
    )
    assert classify([recovered], serving=True, now=NOW).state == HealthState.HEALTHY


def test_running_and_unhealthy_hold_together():
    assert CRASH_LOOP["status"]["phase"] == "Running"
    assert pod_phase(CRASH_LOOP, now=NOW) == PodPhase.FAILED
    assert classify([CRASH_LOOP], serving=True, now=NOW).unhealthy


def test_a_pod_stuck_on_err_image_pull_is_still_phase_pending_but_in_the_failure_set():
    assert ERR_IMAGE_PULL["status"]["phase"] == "Pending"
    assert pod_phase(ERR_IMAGE_PULL, now=NOW) == PodPhase.IMAGE_DOWNLOAD_FAILED
    assert pod_phase(ERR_IMAGE_PULL, now=NOW) in FAILURE_PHASES


@pytest.mark.parametrize(
    ("body", "phase"),
    [
        (HEALTHY_POD, "RUNNING"),
        (STARTING, "PENDING"),
        (IMAGE_PULL_BACKOFF, "IMAGE_DOWNLOAD_FAILED"),
        (
            pod(
                "Pending",
                ready=False,
                state={"waiting": {"reason": "InvalidImageName", "message": "couldn't parse image reference"}},
            ),
            "IMAGE_DOWNLOAD_FAILED",
        ),
        (CONFIG_ERROR, "INIT_FAILED"),
        (
            pod(
                "Pending",
                ready=False,
                init=[
                    {
                        "name": "migrate",
                        "state": {"terminated": {"exitCode": 1, "reason": "Error"}},
                        "restartCount": 0,
                        "ready": False,
                    }
                ],
            ),
            "INIT_FAILED",
        ),
        (
            pod(
                "Pending",
                ready=False,
                state={"waiting": {"reason": "CreateContainerError", "message": "failed to reserve container name"}},
            ),
            "POD_CREATE_FAILED",
        ),
        (
            pod("Pending", ready=False, state={"waiting": {"reason": "RunContainerError", "message": "exec: app: not found"}}),
            "POD_CREATE_FAILED",
        ),
        (CRASH_LOOP, "FAILED"),
        (OOM_NOW, "FAILED"),
        (pod("Succeeded", ready=False, state={"terminated": {"exitCode": 0, "reason": "Completed"}}), "SUCCEEDED"),
        (pod("Unknown"), "UNKNOWN"),
        (pod(""), "PHASE_UNSPECIFIED"),
    ],
)
def test_pod_phases_follow_the_spec_table(body, phase):
    assert pod_phase(body, now=NOW) == phase


def test_terminated_is_read_from_the_container_state_not_the_phase():
    # The pod is still Running while its only container has terminated: the phase says nothing of it.
    assert OOM_NOW["status"]["phase"] == "Running"
    assert classify([OOM_NOW], serving=True, now=NOW).reason == "OOMKilled (exit 137)"


def test_the_worst_problem_across_pods_is_named():
    assert classify([HEALTHY_POD, NOT_READY, CRASH_LOOP], serving=True, now=NOW).reason == "CrashLoopBackOff"


def test_a_typed_v1pod_from_the_client_classifies_like_its_json():
    client = ApiClient()
    typed = client.deserialize(json.dumps(OOM_LOOP), "V1Pod", "application/json")
    assert isinstance(typed, V1Pod)
    assert classify([typed], serving=True, now=NOW).reason == "OOMKilled (exit 137)"
