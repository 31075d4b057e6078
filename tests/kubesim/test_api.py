"""The kubernetes Python client against kubesim's real apiserver."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from kubesim.testing import TIMEOUT

pytestmark = pytest.mark.cluster


def _cm(name: str, value: str = "1") -> dict:
    return {"metadata": {"name": name}, "data": {"k": value}}


def test_it_creates_and_lists_objects(kube_api_client, kube_namespace):
    core = client.CoreV1Api(kube_api_client)
    for i in range(3):
        core.create_namespaced_config_map(kube_namespace, _cm(f"c{i}"), _request_timeout=TIMEOUT)

    items = core.list_namespaced_config_map(kube_namespace, _request_timeout=TIMEOUT).items

    assert sorted(i.metadata.name for i in items if i.metadata.name.startswith("c")) == ["c0", "c1", "c2"]


def test_it_watches_from_a_resource_version_and_sends_bookmarks(kube_api_client, kube_namespace):
    core = client.CoreV1Api(kube_api_client)
    rv = core.list_namespaced_config_map(kube_namespace, _request_timeout=TIMEOUT).metadata.resource_version
    core.create_namespaced_config_map(kube_namespace, _cm("watched"), _request_timeout=TIMEOUT)

    seen = []
    w = watch.Watch()
    # The watch cache sends a bookmark 2 s before the server-side timeout ends the watch, and in
    # 1.20 only once the resource type saw an event after the watch began: make one.
    for event in w.stream(
        core.list_namespaced_config_map,
        kube_namespace,
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=4,
        _request_timeout=TIMEOUT,
    ):
        seen.append((event["type"], event["raw_object"]["metadata"].get("name")))
        if seen == [("ADDED", "watched")]:
            core.create_namespaced_config_map(kube_namespace, _cm("later"), _request_timeout=TIMEOUT)
        if event["type"] == "BOOKMARK":
            w.stop()

    assert ("ADDED", "watched") in seen
    assert any(t == "BOOKMARK" for t, _ in seen)


def test_it_answers_410_gone_for_a_compacted_resource_version(kube_cluster, kube_api_client, kube_namespace):
    core = client.CoreV1Api(kube_api_client)
    core.create_namespaced_config_map(kube_namespace, _cm("before"), _request_timeout=TIMEOUT)
    old_rv = core.list_namespaced_config_map(kube_namespace, _request_timeout=TIMEOUT).metadata.resource_version
    core.create_namespaced_config_map(kube_namespace, _cm("after"), _request_timeout=TIMEOUT)
    # The API server answers recent versions from its watch cache (100 events per kind by
    # default) whatever etcd keeps; push the old version out of that window too.
    for n in range(120):
        core.patch_namespaced_config_map("after", kube_namespace, {"data": {"n": str(n)}}, _request_timeout=TIMEOUT)

    kube_cluster.compact_etcd()

    # The generated client raises for an ERROR event with code 410 (watch.py), or hands it over.
    status = None
    w = watch.Watch()
    try:
        for event in w.stream(
            core.list_namespaced_config_map, kube_namespace, resource_version=old_rv, timeout_seconds=5, _request_timeout=TIMEOUT
        ):
            if event["type"] == "ERROR":
                status = event["raw_object"].get("code")
                break
    except ApiException as exc:
        status = exc.status
    assert status == 410


def test_it_reports_a_conflict_between_field_managers_and_forces_it(kube_api_client, kube_namespace):
    core = client.CoreV1Api(kube_api_client)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"colour": "blue"}}

    def apply(manager: str, colour: str, force: bool = False) -> client.V1ConfigMap:
        body["data"]["colour"] = colour
        return core.patch_namespaced_config_map(
            "shared",
            kube_namespace,
            body,
            field_manager=manager,
            force=force,
            _content_type="application/apply-patch+yaml",
            _request_timeout=TIMEOUT,
        )

    apply("alice", "blue")
    with pytest.raises(ApiException) as conflict:
        apply("bob", "red")
    assert conflict.value.status == 409
    assert "conflict" in json.loads(conflict.value.body)["message"].lower()

    forced = apply("bob", "red", force=True)

    assert forced.data == {"colour": "red"}
    owners = {m.manager for m in forced.metadata.managed_fields if "f:colour" in json.dumps(m.fields_v1)}
    assert owners == {"bob"}


def test_it_accepts_server_side_dry_run(kube_api_client, kube_namespace):
    core = client.CoreV1Api(kube_api_client)

    core.create_namespaced_config_map(kube_namespace, _cm("dry"), dry_run="All", _request_timeout=TIMEOUT)

    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("dry", kube_namespace, _request_timeout=TIMEOUT)
    assert missing.value.status == 404
