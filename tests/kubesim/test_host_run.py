"""host_run really runs a pod's commands on the host: a build pod's clone fetches a real commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from kubernetes import client

from kubesim.testing import TIMEOUT, container_status, create_pod, wait_pod

pytestmark = pytest.mark.cluster

CLONE = (
    "git clone --quiet $(REPO) /workspace/src && cd /workspace/src && "
    "git checkout --quiet $(COMMIT) && git rev-parse HEAD > /dev/termination-log"
)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=alice", "-c", "user.email=alice@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "shop.git"
    path.mkdir()
    _git(path, "init", "--quiet", "-b", "main")
    (path / "README").write_text("hello from the shop\n")
    _git(path, "add", "README")
    _git(path, "commit", "--quiet", "-m", "first")
    return path, _git(path, "rev-parse", "HEAD")


def _build_pod(repo: Path, commit: str) -> dict:
    mounts = [{"name": "workspace", "mountPath": "/workspace"}]
    return {
        "metadata": {"name": "build"},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "workspace", "emptyDir": {}}, {"name": "auth", "secret": {"secretName": "git-auth"}}],
            "initContainers": [
                {
                    "name": "clone",
                    "image": "alpine/git:2.45",
                    "command": ["sh", "-c", CLONE],
                    "env": [{"name": "REPO", "value": str(repo)}, {"name": "COMMIT", "value": commit}],
                    "volumeMounts": mounts,
                }
            ],
            "containers": [
                {
                    "name": "build",
                    "image": "builder:1",
                    "command": ["sh", "-c", 'cat $SRC_DIR/README && cat /etc/git-auth/token && echo " $TOKEN"'],
                    "env": [
                        {"name": "SRC_DIR", "value": "/workspace/src"},
                        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "git-auth", "key": "token"}}},
                    ],
                    "volumeMounts": [*mounts, {"name": "auth", "mountPath": "/etc/git-auth"}],
                }
            ],
        },
    }


@pytest.fixture
def host_run_pods(kube_api_client, kube_namespace, behaviours):
    behaviours.set("host", match={"image": "*"}, behaviour={"type": "host_run", "start_delay": 0})
    client.CoreV1Api(kube_api_client).create_namespaced_secret(
        kube_namespace, {"metadata": {"name": "git-auth"}, "stringData": {"token": "t0ken"}}, _request_timeout=TIMEOUT
    )
    return kube_namespace


def test_host_run_clones_the_commit_and_shares_the_workspace(kube_api_client, host_run_pods, repo):
    path, commit = repo
    create_pod(kube_api_client, host_run_pods, _build_pod(path, commit))

    pod = wait_pod(kube_api_client, host_run_pods, "build", lambda p: p.status.phase in ("Succeeded", "Failed"), timeout=30)

    clone = container_status(pod, "clone", init=True).state.terminated
    assert (clone.exit_code, clone.message.strip()) == (0, commit)
    assert pod.status.phase == "Succeeded"
    logs = client.CoreV1Api(kube_api_client).read_namespaced_pod_log(
        "build", host_run_pods, container="build", _request_timeout=TIMEOUT
    )
    assert logs.splitlines() == ["hello from the shop", "t0ken t0ken"]


def test_host_run_fails_the_pod_when_the_commit_does_not_exist(kube_api_client, host_run_pods, repo):
    path, _ = repo
    create_pod(kube_api_client, host_run_pods, _build_pod(path, "0" * 40))

    pod = wait_pod(kube_api_client, host_run_pods, "build", lambda p: p.status.phase in ("Succeeded", "Failed"), timeout=30)

    clone = container_status(pod, "clone", init=True).state.terminated
    assert pod.status.phase == "Failed"
    assert clone.exit_code != 0 and clone.reason == "Error"
    assert container_status(pod, "build").state.waiting.reason == "PodInitializing"
    logs = client.CoreV1Api(kube_api_client).read_namespaced_pod_log(
        "build", host_run_pods, container="clone", _request_timeout=TIMEOUT
    )
    assert "0000000000000000000000000000000000000000" in logs
