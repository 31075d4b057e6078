"""The controller under a misbehaving API server: dropped watches and 500s change nothing but latency."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
import yaml

from apps.deployments import services
from tests.e2e.test_rollouts import IMAGE, behave, settled
from tests.factories import ImageAppFactory
from tests.support.faults import DroppingProxy
from tests.support.live import Process, unique_name, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.cluster]


@pytest.fixture
def controller_behind_proxy(slipway_stack, kube_cluster, tmp_path):
    """Replace the stack's controller with one that reaches the API server through a dropping proxy."""
    proxy = DroppingProxy(kube_cluster.ports["apiserver"])
    config = yaml.safe_load(Path(kube_cluster.kubeconfig).read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    stack_controller = slipway_stack.processes["controller"]
    stack_controller.stop()  # a clean stop gives the Lease up
    process = Process(
        "proxied-controller",
        stack_controller.argv,
        {**slipway_stack.env, "KUBECONFIG": str(kubeconfig)},
        tmp_path / "controller.log",
    )
    process.start()
    process.wait_for_output("caches synced", timeout=30)  # at once: the Lease was released, not left to expire
    yield proxy, process
    process.stop()
    proxy.close()
    slipway_stack.restart("controller")


def test_a_stopped_controller_gives_its_lease_up_and_a_new_one_leads_at_once(controller_behind_proxy):
    _, process = controller_behind_proxy
    assert "waiting to lead" in process.output() and "leading" in process.output()


def test_dropped_watches_and_api_server_errors_change_nothing_but_latency(
    controller_behind_proxy, kube_cluster, acme, alice, behaviours
):
    proxy, process = controller_behind_proxy
    app = ImageAppFactory(name=unique_name("demo"), team=acme, created_by=alice, image_url="127.0.0.1:5000/demo", port=8080)
    behave(behaviours, app, "slow_start", ready_after=6.0)
    deployment = services.deployment_create(app=app, trigger="manual", actor=alice, image=IMAGE)
    wait_until(
        lambda: type(deployment).objects.get(pk=deployment.pk).rollout_generation,
        timeout=30,
        message="the manifests to be applied",
    )

    etcd = kube_cluster.processes()["etcd"]["pid"]
    for round in range(3):
        # The controller backs off between attempts, so it may take a while to come back.
        wait_until(lambda: proxy.connections, timeout=60, message="the controller to reconnect")
        proxy.drop()
        if round == 0:
            os.kill(etcd, signal.SIGSTOP)  # the API server now answers with errors and timeouts
            threading.Timer(5, os.kill, (etcd, signal.SIGCONT)).start()  # a five-second outage

    assert settled(deployment, timeout=90).status == "live", deployment.error
    assert proxy.dropped >= 4
    assert "reconnecting in" in process.output() or "relisting" in process.output()
