"""Helpers for tests that drive pods on kubesim through the kubernetes client."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from kubesim.wait import wait_for

TIMEOUT = 10  # seconds for one API call


def pod_body(
    name: str,
    image: str = "app:1",
    *,
    restart: str = "Always",
    command: list[str] | None = None,
    env: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """Return a minimal Pod manifest with one container named `app`."""
    container: dict[str, Any] = {"name": "app", "image": image}
    if command:
        container["command"] = command
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": restart, "containers": [container], "terminationGracePeriodSeconds": 1, **spec},
    }


def create_pod(api: client.ApiClient, ns: str, body: dict[str, Any]) -> None:
    """Create a pod."""
    client.CoreV1Api(api).create_namespaced_pod(ns, body, _request_timeout=TIMEOUT)  # type: ignore[arg-type]


def read_pod(api: client.ApiClient, ns: str, name: str) -> client.V1Pod:
    """Read a pod."""
    return client.CoreV1Api(api).read_namespaced_pod(name, ns, _request_timeout=TIMEOUT)


def wait_pod(
    api: client.ApiClient, ns: str, name: str, predicate: Any, *, timeout: float = 20, message: str = ""
) -> client.V1Pod:
    """Wait until predicate(pod) holds and return the pod."""

    def check() -> client.V1Pod | None:
        pod = read_pod(api, ns, name)
        return pod if predicate(pod) else None

    pod: client.V1Pod = wait_for(
        check, timeout=timeout, interval=0.05, message=message or f"pod {ns}/{name} to reach the expected state"
    )
    return pod


def container_status(pod: client.V1Pod, name: str = "app", init: bool = False) -> client.V1ContainerStatus | None:
    """Return one container's status, or None before the kubelet wrote it."""
    status = pod.status
    if status is None:
        return None
    statuses = (status.init_container_statuses if init else status.container_statuses) or []
    return next((s for s in statuses if s.name == name), None)


def waiting_reason(pod: client.V1Pod, name: str = "app") -> str | None:
    """Return the waiting reason of a container, if it is waiting."""
    st = container_status(pod, name)
    return st.state.waiting.reason if st and st.state and st.state.waiting else None


def condition(obj: Any, ctype: str) -> Any:
    """Return the condition of that type from an object's status, or None."""
    return next((c for c in (obj.status.conditions or []) if c.type == ctype), None)
