"""pytest fixtures for tests that need a Kubernetes API: one local control plane per run.

Register with `pytest_plugins = ["kubesim.pytest_plugin"]` in the root conftest.py.

Fixtures:
- kube_cluster (session): a running kubesim.cluster.Cluster. Set KUBESIM_REUSE=NAME to use an
  instance started with `python -m kubesim up --name NAME` (left running afterwards).
- kube_api_client (session): a kubernetes.client.ApiClient for it.
- kube_namespace (function): a fresh namespace whose default ServiceAccount is ready; deleted after.
- behaviours (function): set behaviour rules for this test; removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kubesim import behaviours as bh
from kubesim.build import BuildError
from kubesim.cluster import Cluster, ClusterError, state_root
from kubesim.wait import wait_for

__all__ = [
    "behaviours",
    "kube_api_client",
    "kube_cluster",
    "kube_namespace",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "Behaviours",
]

# One instance per test process even if these fixtures are defined twice (the root plugin and a
# conftest that star-imports them): both fixture copies share this.
_lock = threading.Lock()
_shared: dict[str, Any] = {"cluster": None, "users": 0}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cluster: the test needs the kubesim local cluster")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Mark every test that uses the cluster, so `-m "not cluster"` runs the rest quickly.
    for item in items:
        names = getattr(item, "fixturenames", ())
        if {"kube_cluster", "kube_namespace", "kube_api_client", "behaviours"} & set(names):
            item.add_marker(pytest.mark.cluster)


def _reap_orphans() -> None:
    """Stop instances left by test runs that were killed before their teardown."""
    root = state_root()
    if not root.is_dir():
        return
    for folder in root.glob("pytest-*"):
        try:
            pid = int(folder.name.removeprefix("pytest-"))
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
            continue  # that test run is still going
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        Cluster(folder.name).stop(force=True)
        shutil.rmtree(folder, ignore_errors=True)


def _acquire() -> Cluster:
    with _lock:
        if _shared["cluster"] is None:
            _reap_orphans()
            reuse = os.environ.get("KUBESIM_REUSE")
            cluster = Cluster(reuse) if reuse else Cluster(f"pytest-{os.getpid()}")
            try:
                cluster.start(timeout=180, quiet=False)
            except (BuildError, ClusterError) as exc:
                pytest.fail(f"kubesim could not start: {exc}", pytrace=False)
            _shared["cluster"] = cluster
        _shared["users"] += 1
        return _shared["cluster"]


def _release() -> None:
    with _lock:
        _shared["users"] -= 1
        cluster: Cluster | None = _shared["cluster"]
        if _shared["users"] > 0 or cluster is None:
            return
        _shared["cluster"] = None
        if cluster.started_here:
            cluster.stop()
            if cluster.state_dir.parent == state_root() and cluster.name.startswith("pytest-"):
                shutil.rmtree(cluster.state_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def kube_cluster() -> Iterator[Cluster]:
    """Start (or reuse) one local control plane for the whole test run."""
    cluster = _acquire()
    try:
        yield cluster
    finally:
        _release()


@pytest.fixture(scope="session")
def kube_api_client(kube_cluster: Cluster) -> Iterator[Any]:
    """Return an ApiClient for the session's cluster."""
    api = kube_cluster.api_client()
    yield api
    api.close()


def _core(api: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(api)


@pytest.fixture
def kube_namespace(kube_api_client: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """Create a fresh namespace, wait until it accepts pods, and delete it after the test."""
    from kubernetes.client.rest import ApiException

    core = _core(kube_api_client)
    base = "".join(ch if ch.isalnum() else "-" for ch in request.node.name.lower())[:40]
    name = f"{base.strip('-')}-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name, "labels": {"kubesim.slipway.dev/test": "true"}}}, _request_timeout=10)

    def sa_ready() -> bool:
        # 1.20 refuses pods until the default ServiceAccount has its token Secret.
        sa = core.read_namespaced_service_account("default", name, _request_timeout=5)
        return bool(sa.secrets)

    wait_for(
        sa_ready, timeout=30, interval=0.05, ignore=(ApiException,), message=f"the default ServiceAccount of namespace {name}"
    )
    yield name
    try:
        # Do not wait for the namespace to go: the controller finishes it in the background.
        core.delete_namespace(name, _request_timeout=10)
    except ApiException as exc:
        if exc.status != 404:
            raise


class Behaviours:
    """Set behaviour rules for one test; every rule it set is removed afterwards."""

    def __init__(self, api: Any, namespace: str | None) -> None:
        self.api = api
        self.namespace = namespace
        self.names: list[str] = []

    def set(self, name: str, *, match: dict[str, Any] | None = None, behaviour: dict[str, Any] | str, priority: int = 0) -> str:
        """Add a rule; scoped to the test's namespace unless match names one. Returns its key."""
        match = dict(match or {})
        if self.namespace and "namespace" not in match:
            match["namespace"] = self.namespace
        key = f"{self.namespace}.{name}" if self.namespace else name
        bh.set_behaviour(self.api, key, match=match, behaviour=behaviour, priority=priority)
        self.names.append(key)
        return key

    def clear(self) -> None:
        """Remove the rules this helper set."""
        if self.names:
            bh.clear_behaviours(self.api, self.names)
            self.names = []


@pytest.fixture
def behaviours(kube_api_client: Any, request: pytest.FixtureRequest) -> Iterator[Behaviours]:
    """Return a Behaviours helper, scoped to kube_namespace when the test uses it."""
    namespace = None
    if "kube_namespace" in request.fixturenames:
        namespace = request.getfixturevalue("kube_namespace")
    helper = Behaviours(kube_api_client, namespace)
    yield helper
    helper.clear()
