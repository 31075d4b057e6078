"""platform/ against a real Kubernetes API server (kubesim: Kubernetes 1.20 with simulated nodes).

The trial overlay is applied for real, exactly as docs/install.md says: namespace, Secret, then
`kubectl apply -k platform/overlays/trial`. The production overlay is applied with
`--dry-run=server`, without its PodDisruptionBudget: 1.20 serves PodDisruptionBudget only as
policy/v1beta1, and the manifests target current clusters (policy/v1), where test_platform.py
validates them.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from builder import kube
from kubesim.wait import wait_for
from tests.install.conftest import PLATFORM, kubectl, render
from tests.install.test_install_guide import _block

pytestmark = pytest.mark.cluster

NAMESPACE = "slipway"
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:slipway"
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
TEST_FERNET_KEY = "UpGmAnkNlDMS5a9KfRx5IlCxbrcH6Yg-K9EronejpZk="
# Kinds that Kubernetes 1.20 does not serve at the version the manifests use.
NOT_SERVED_BY_1_20 = {("policy/v1", "PodDisruptionBudget")}


def _kubectl(cluster, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [kubectl(), "--kubeconfig", str(cluster.kubeconfig), *args], input=stdin, capture_output=True, text=True, timeout=120
    )
    if check:
        assert proc.returncode == 0, f"kubectl {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _namespace_gone(cluster) -> None:
    """Wait until namespace `slipway` (of an earlier test or run) is gone."""
    wait_for(
        lambda: _kubectl(cluster, "get", "namespace", NAMESPACE, check=False).returncode != 0,
        timeout=120,
        message=f"namespace {NAMESPACE} of an earlier test to be gone",
    )


def test_the_guides_least_privilege_kubeconfig_may_do_what_slipway_needs_and_no_more(kube_cluster, tmp_path):
    _namespace_gone(kube_cluster)
    # As written, run from the repository, writing ./kubeconfig; `sudo` is not needed as root.
    script = _block("sa-kubeconfig").replace("sudo ", "").replace("platform/base/rbac.yaml", str(PLATFORM / "base" / "rbac.yaml"))
    env = {**os.environ, "KUBECONFIG": str(kube_cluster.kubeconfig), "PATH": f"{Path(kubectl()).parent}:{os.environ['PATH']}"}
    try:
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        made = tmp_path / "kubeconfig"
        assert stat.S_IMODE(made.stat().st_mode) == 0o640 and made.stat().st_gid == 10001
        assert not (tmp_path / "ca.crt").exists()

        cluster = kube.Cluster(kube.load_api_client(kubeconfig=str(made)))
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "slipway-guide"}})
        assert cluster.list("Pod", "slipway-guide")["items"] == []
        assert cluster.lease_acquire(
            namespace=NAMESPACE, name="guide", identity="a", duration=15, now="2025-01-01T00:00:00.000000Z", expired=True
        )
        with pytest.raises(kube.ClusterError) as refused:
            cluster.list("ConfigMap", "slipway-guide")
        assert refused.value.status == 403
        with pytest.raises(kube.ClusterError) as refused:
            cluster.lease_acquire(
                namespace="kube-system", name="guide", identity="a", duration=15, now="2025-01-01T00:00:00.000000Z", expired=True
            )
        assert refused.value.status == 403
    finally:
        _kubectl(
            kube_cluster, "delete", "namespace", "slipway-guide", NAMESPACE, "--wait=false", "--ignore-not-found", check=False
        )
        _kubectl(kube_cluster, "delete", "clusterrolebinding,clusterrole", "slipway", "--ignore-not-found", check=False)


@pytest.fixture(scope="module")
def trial(kube_cluster):
    """Install the trial overlay as the guide does; remove it afterwards."""
    # A reused cluster, or the test above, may still be deleting the namespace.
    _namespace_gone(kube_cluster)
    _kubectl(kube_cluster, "create", "namespace", NAMESPACE, "--save-config")
    password = "0123456789abcdef0123456789abcdef"
    _kubectl(
        kube_cluster, "-n", NAMESPACE, "create", "secret", "generic", "slipway-secrets",
        "--from-literal=SLIPWAY_SECRET_KEY=test-secret-key-for-the-install-tests-0123456789",
        f"--from-literal=SLIPWAY_ENCRYPTION_KEYS={TEST_FERNET_KEY}",
        f"--from-literal=POSTGRES_PASSWORD={password}",
        f"--from-literal=DATABASE_URL=postgres://slipway:{password}@slipway-postgres:5432/slipway",
        "--from-literal=REDIS_URL=redis://slipway-redis:6379/0",
    )  # fmt: skip
    applied = _kubectl(kube_cluster, "apply", "-k", str(PLATFORM / "overlays" / "trial"))
    try:
        yield applied
    finally:
        _kubectl(
            kube_cluster, "delete", "-k", str(PLATFORM / "overlays" / "trial"), "--wait=false", "--ignore-not-found", check=False
        )
        _kubectl(kube_cluster, "delete", "namespace", NAMESPACE, "--wait=false", "--ignore-not-found", check=False)


def test_applying_the_trial_overlay_creates_every_object_without_a_warning(kube_cluster, trial):
    assert "Warning" not in trial.stderr, trial.stderr
    objects = render(PLATFORM / "overlays" / "trial")
    found = _kubectl(kube_cluster, "get", "-f", "-", "-o", "name", stdin=yaml.safe_dump_all(objects)).stdout.split()
    assert len(found) == len(objects)


def test_the_migration_job_completes_and_every_slipway_process_rolls_out(kube_cluster, trial):
    _kubectl(kube_cluster, "-n", NAMESPACE, "wait", "--for=condition=complete", "job/slipway-migrate", "--timeout=90s")
    for name in ("slipway-web", "slipway-worker", "slipway-beat", "slipway-controller", "slipway-redis"):
        _kubectl(kube_cluster, "-n", NAMESPACE, "rollout", "status", f"deployment/{name}", "--timeout=90s")


def test_the_bundled_postgresql_claims_its_volume(kube_cluster, trial):
    # kubesim binds no volumes (testbed.md), so the claim stays Pending here; a real cluster binds it.
    claim = wait_for(
        lambda: (
            _kubectl(kube_cluster, "-n", NAMESPACE, "get", "pvc", "data-slipway-postgres-0", "-o", "yaml", check=False).stdout
        ),
        timeout=30,
        message="the PostgreSQL volume claim",
    )
    assert yaml.safe_load(claim)["spec"]["resources"]["requests"]["storage"] == "10Gi"


def _allowed(api, *, verb: str, group: str, resource: str, namespace: str) -> bool:
    resource, _, subresource = resource.partition("/")
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=ACCOUNT,
            groups=["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"],
            resource_attributes=client.V1ResourceAttributes(
                verb=verb, group=group, resource=resource, subresource=subresource or None, namespace=namespace
            ),
        )
    )
    answer = client.AuthorizationV1Api(api).create_subject_access_review(review, _request_timeout=10)
    return bool(answer.status.allowed)


def test_the_service_account_may_do_exactly_what_the_cluster_module_needs(kube_cluster, kube_api_client, trial):
    granted = {(group, resource): set(verbs) for group, resource, verbs in kube.RBAC_RULES}
    wrong = []
    for (group, resource), verbs in granted.items():
        # Leases only in Slipway's own namespace; everything else in any app namespace.
        namespace = NAMESPACE if resource == "leases" else "slipway-shop"
        for verb in VERBS:
            if _allowed(kube_api_client, verb=verb, group=group, resource=resource, namespace=namespace) != (verb in verbs):
                wrong.append((verb, group, resource, namespace))
    assert wrong == []
    assert not _allowed(kube_api_client, verb="update", group="coordination.k8s.io", resource="leases", namespace="kube-system")
    assert not _allowed(kube_api_client, verb="get", group="", resource="configmaps", namespace="slipway-shop")
    assert not _allowed(
        kube_api_client, verb="create", group="rbac.authorization.k8s.io", resource="clusterrolebindings", namespace=""
    )


def test_the_production_overlay_passes_the_api_servers_dry_run(kube_cluster, trial):
    objects = render(PLATFORM / "overlays" / "production")
    served = [o for o in objects if (o["apiVersion"], o["kind"]) not in NOT_SERVED_BY_1_20]
    assert len(objects) - len(served) == 1, "only the PodDisruptionBudget is left out"
    proc = _kubectl(kube_cluster, "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(served))
    assert "(server dry run)" in proc.stdout
