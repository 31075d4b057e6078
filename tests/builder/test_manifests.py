"""App manifests: objects, labels, probes, rollout safety, settings hash and schema validity."""

from __future__ import annotations

import json
from dataclasses import replace

import kubernetes_validate
import pytest

from builder.manifests import render_app, render_example, settings_hash
from builder.specs import AppSpec, DeploySettings

DIGEST = "sha256:" + "5d" * 32
SETTINGS = DeploySettings()
VERSIONS = [("1.25", False), ("1.30", True), ("1.37", True)]


def make_spec(**overrides: object) -> AppSpec:
    values: dict[str, object] = {
        "app": "shop",
        "deployment_number": 4,
        "image": f"127.0.0.1:5000/shop@{DIGEST}",
        "port": 8000,
        "env": {"DATABASE_URL": "postgres://shop:pw@db/shop", "LOG_LEVEL": "info"},
    }
    values.update(overrides)
    return AppSpec(**values)  # type: ignore[arg-type]


SPECS = {
    "http health check": make_spec(),
    "tcp probe, liveness, custom domain, TLS": make_spec(
        health_check_path="", liveness_probe=True, host="shop.acme.example", tls_secret="shop-tls", ingress_class="nginx"
    ),
    "no env, three replicas": make_spec(env={}, replicas=3, cpu_limit="2", memory_limit="1Gi", memory_request="512Mi"),
}


def by_kind(objects: list[dict]) -> dict[str, dict]:
    return {o["kind"]: o for o in objects}


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize(("version", "strict"), VERSIONS)
def test_every_object_is_valid_kubernetes(name: str, version: str, strict: bool) -> None:
    for obj in render_app(SPECS[name], SETTINGS):
        kubernetes_validate.validate(obj, version, strict=strict)


def test_it_renders_namespace_secret_deployment_service_and_ingress_in_apply_order() -> None:
    objects = render_app(make_spec(), SETTINGS)
    assert [o["kind"] for o in objects] == ["Namespace", "Secret", "Deployment", "Service", "Ingress"]
    assert {o["metadata"].get("namespace") for o in objects[1:]} == {"slipway-shop"}
    assert objects[0]["metadata"]["name"] == "slipway-shop"


def test_every_object_and_the_pod_template_carry_app_and_deployment_labels() -> None:
    objects = render_app(make_spec(), SETTINGS)
    template = by_kind(objects)["Deployment"]["spec"]["template"]
    for labels in [o["metadata"]["labels"] for o in objects] + [template["metadata"]["labels"]]:
        assert labels["slipway.dev/app"] == "shop"
        assert labels["slipway.dev/deployment"] == "4"
        assert labels["app.kubernetes.io/managed-by"] == "slipway"


def test_the_selector_names_the_app_only_so_it_survives_new_deployments() -> None:
    deployment = by_kind(render_app(make_spec(), SETTINGS))["Deployment"]
    assert deployment["spec"]["selector"] == {"matchLabels": {"slipway.dev/app": "shop"}}
    service = by_kind(render_app(make_spec(), SETTINGS))["Service"]
    assert service["spec"]["selector"] == {"slipway.dev/app": "shop"}


def test_the_image_is_pinned_by_digest() -> None:
    container = by_kind(render_app(make_spec(), SETTINGS))["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"127.0.0.1:5000/shop@{DIGEST}"
    with pytest.raises(ValueError, match="pinned by digest"):
        make_spec(image="127.0.0.1:5000/shop:latest")


def test_env_comes_from_the_secret_and_port_is_offered_unless_set() -> None:
    objects = by_kind(render_app(make_spec(), SETTINGS))
    assert objects["Secret"]["stringData"] == {"DATABASE_URL": "postgres://shop:pw@db/shop", "LOG_LEVEL": "info"}
    container = objects["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "shop-env"}}]
    assert container["env"] == [{"name": "PORT", "value": "8000"}]
    own_port = by_kind(render_app(make_spec(env={"PORT": "9000"}), SETTINGS))["Deployment"]
    assert "env" not in own_port["spec"]["template"]["spec"]["containers"][0]


def test_env_values_stay_in_the_secret_only() -> None:
    objects = render_app(make_spec(), SETTINGS)
    secret = json.dumps(by_kind(objects)["Secret"])
    rest = json.dumps([o for o in objects if o["kind"] != "Secret"])
    assert "postgres://shop:pw@db/shop" in secret
    assert "postgres://shop:pw@db/shop" not in rest
    assert "postgres://shop:pw@db/shop" not in repr(make_spec())


def test_readiness_is_http_on_the_health_path_or_tcp_without_one() -> None:
    http = by_kind(render_app(make_spec(health_check_path="/healthz"), SETTINGS))["Deployment"]
    probe = http["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    assert probe["httpGet"] == {"path": "/healthz", "port": "http"}
    tcp = by_kind(render_app(make_spec(health_check_path=""), SETTINGS))["Deployment"]
    container = tcp["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["tcpSocket"] == {"port": "http"}
    assert "livenessProbe" not in container


def test_liveness_is_optional_and_waits_before_its_first_check() -> None:
    deployment = by_kind(render_app(make_spec(liveness_probe=True), SETTINGS))["Deployment"]
    liveness = deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    assert liveness["initialDelaySeconds"] == SETTINGS.liveness_initial_delay_seconds
    assert liveness["httpGet"]["path"] == "/"


def test_the_rollout_never_drops_below_the_desired_ready_count() -> None:
    spec = by_kind(render_app(make_spec(replicas=3), SETTINGS))["Deployment"]["spec"]
    assert spec["replicas"] == 3
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    assert spec["progressDeadlineSeconds"] == SETTINGS.progress_deadline_seconds
    assert spec["revisionHistoryLimit"] == SETTINGS.revision_history_limit
    custom = by_kind(render_app(make_spec(progress_deadline_seconds=120), SETTINGS))["Deployment"]
    assert custom["spec"]["progressDeadlineSeconds"] == 120


def test_requests_and_limits_are_set_and_memory_request_defaults_to_the_limit() -> None:
    container = by_kind(render_app(make_spec(cpu_limit="1", memory_limit="768Mi"), SETTINGS))["Deployment"]["spec"]["template"][
        "spec"
    ]["containers"][0]
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "768Mi"},
        "limits": {"cpu": "1", "memory": "768Mi"},
    }


def test_app_pods_cannot_escalate_and_keep_only_the_capabilities_web_servers_need() -> None:
    pod = by_kind(render_app(make_spec(), SETTINGS))["Deployment"]["spec"]["template"]["spec"]
    context = pod["containers"][0]["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["privileged"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    assert "NET_BIND_SERVICE" in context["capabilities"]["add"]
    assert "NET_RAW" not in context["capabilities"]["add"]
    assert "runAsNonRoot" not in context
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["automountServiceAccountToken"] is False


def test_the_namespace_enforces_pod_security_only_when_configured() -> None:
    # Builds may share the namespace, and rootless BuildKit does not pass "baseline".
    plain = by_kind(render_app(make_spec(), SETTINGS))["Namespace"]
    assert not any(key.startswith("pod-security.kubernetes.io/") for key in plain["metadata"]["labels"])
    enforced = by_kind(render_app(make_spec(), replace(SETTINGS, pod_security_level="baseline")))["Namespace"]
    assert enforced["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"


def test_the_ingress_serves_app_dot_base_domain_with_class_and_tls() -> None:
    settings = replace(SETTINGS, base_domain="apps.example.com", ingress_class="traefik", tls_secret="wildcard")
    ingress = by_kind(render_app(make_spec(), settings))["Ingress"]
    assert ingress["apiVersion"] == "networking.k8s.io/v1"
    assert ingress["spec"]["rules"][0]["host"] == "shop.apps.example.com"
    assert ingress["spec"]["ingressClassName"] == "traefik"
    assert ingress["spec"]["tls"] == [{"hosts": ["shop.apps.example.com"], "secretName": "wildcard"}]
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]
    assert backend == {"service": {"name": "shop", "port": {"name": "http"}}}


def test_a_custom_domain_wins_over_the_base_domain() -> None:
    ingress = by_kind(render_app(make_spec(host="shop.acme.example"), SETTINGS))["Ingress"]
    assert ingress["spec"]["rules"][0]["host"] == "shop.acme.example"


def test_without_any_host_there_is_no_ingress() -> None:
    objects = render_app(make_spec(), replace(SETTINGS, base_domain=None))
    assert "Ingress" not in by_kind(objects)


def test_the_settings_hash_changes_when_env_changes_so_redeploy_rolls_pods() -> None:
    before = make_spec()
    after = make_spec(env={**before.env, "LOG_LEVEL": "debug"})
    assert settings_hash(before, SETTINGS) != settings_hash(after, SETTINGS)
    annotation = "slipway.dev/settings-hash"
    template = by_kind(render_app(after, SETTINGS))["Deployment"]["spec"]["template"]
    assert template["metadata"]["annotations"][annotation] == settings_hash(after, SETTINGS)


def test_the_settings_hash_is_stable_for_the_same_settings() -> None:
    assert settings_hash(make_spec(), SETTINGS) == settings_hash(make_spec(deployment_number=5), SETTINGS)
    assert settings_hash(make_spec(port=8000), SETTINGS) != settings_hash(make_spec(port=9000), SETTINGS)


def test_a_hash_key_makes_the_hash_unguessable_without_it() -> None:
    keyed = replace(SETTINGS, settings_hash_key="k3y")
    assert settings_hash(make_spec(), keyed) != settings_hash(make_spec(), SETTINGS)
    assert "k3y" not in repr(keyed)


def test_a_redeploy_timestamp_is_recorded_on_the_pod_template() -> None:
    template = by_kind(render_app(make_spec(redeployed_at="2026-02-01T10:00:00Z"), SETTINGS))["Deployment"]["spec"]["template"]
    assert template["metadata"]["annotations"]["slipway.dev/redeployed-at"] == "2026-02-01T10:00:00Z"


def test_the_example_for_the_docs_renders_and_validates() -> None:
    for obj in render_example():
        kubernetes_validate.validate(obj, "1.37", strict=True)
