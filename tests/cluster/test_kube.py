"""The cluster module against the local API server: apply, watch, and live app logs across pod replacement."""

from __future__ import annotations

import threading

from builder.kube import Cluster, load_api_client, stream_app_logs
from kubesim.wait import wait_for


def deployment(namespace: str) -> dict:
    labels = {"app.kubernetes.io/managed-by": "slipway", "slipway.dev/app": "echo", "slipway.dev/component": "app"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "echo", "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "127.0.0.1:5000/echo:v1"}]},
            },
        },
    }


def test_app_logs_follow_the_pods_through_a_replacement_and_stop_when_closed(kube_cluster, kube_namespace, behaviours):
    kube = Cluster(load_api_client(kubeconfig=str(kube_cluster.kubeconfig)))
    behaviours.set(
        "echo", match={"image": "127.0.0.1:5000/echo*"}, behaviour={"type": "healthy", "log_every": 0.2, "log_line": "tick {n}"}
    )
    kube.apply(deployment(kube_namespace))
    stream = stream_app_logs(kube, kube_namespace, "slipway.dev/app=echo", tail_lines=5)
    first_pod, _, line = next(stream)
    assert line.startswith("app:") or "tick" in line

    kube.delete("Pod", first_pod, kube_namespace)

    def line_from_another_pod():
        pod, _, text = next(stream)
        return pod != first_pod and "tick" in text

    wait_for(line_from_another_pod, timeout=60, interval=0, message="a line from the replacement pod")
    stream.close()
    wait_for(
        lambda: not [t for t in threading.enumerate() if t.name.startswith("applog-")],
        timeout=20,
        message="the log threads to end once the stream is closed",
    )
