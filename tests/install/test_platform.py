"""platform/: the kustomize overlays render, validate against current Kubernetes, and grant exactly what Slipway uses."""

from __future__ import annotations

from collections import Counter

import kubernetes_validate
import pytest

from builder import kube, specs
from tests.install.conftest import (
    OVERLAYS,
    PLATFORM,
    SLIPWAY_COMPONENTS,
    find,
    main_container,
    pod_spec,
    render,
    settings_env_vars,
    slipway_workloads,
    workloads,
)

# The oldest Kubernetes release still supported upstream when this was written, and the newest
# kubernetes-validate knows: the manifests must be valid on both.
KUBERNETES_VERSIONS = ("1.32.0", kubernetes_validate.latest_version())
SECRET_KEYS = {"SLIPWAY_SECRET_KEY", "SLIPWAY_ENCRYPTION_KEYS", "DATABASE_URL", "REDIS_URL"}
# Variables read by something other than config/settings.py.
OTHER_ENV = {"WEB_CONCURRENCY"}  # gunicorn's worker count


def _triples(rules):
    """Expand RBAC rules to a Counter of (group, resource, verb)."""
    found = Counter()
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    found[(group, resource, verb)] += 1
    return found


def test_the_platform_folder_holds_only_yaml_and_the_readme():
    files = [p.relative_to(PLATFORM).as_posix() for p in PLATFORM.rglob("*") if p.is_file()]
    assert files, "platform/ is empty"
    strays = [f for f in files if not f.endswith(".yaml") and f != "README.md"]
    assert strays == []


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_is_valid_for_current_kubernetes(rendered, overlay):
    for version in KUBERNETES_VERSIONS:
        for obj in rendered[overlay]:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                pytest.fail(
                    f"{overlay}: {obj['kind']} {obj['metadata']['name']} is invalid on {version}: {e.message} at {list(e.path)}"
                )


def test_the_base_alone_renders_too():
    names = {(o["kind"], o["metadata"]["name"]) for o in render(PLATFORM / "base")}
    assert ("Deployment", "slipway-web") in names
    assert ("Job", "slipway-migrate") in names


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_installs_every_process_a_namespace_an_account_a_service_and_an_ingress(rendered, overlay):
    objects = rendered[overlay]
    assert set(slipway_workloads(objects)) == set(SLIPWAY_COMPONENTS)
    assert find(objects, "Job", "slipway-migrate")
    for name in ("slipway-web", "slipway-worker", "slipway-beat", "slipway-controller"):
        assert find(objects, "Deployment", name)
    assert find(objects, "Namespace", "slipway")
    assert find(objects, "ServiceAccount", "slipway")
    service = find(objects, "Service", "slipway-web")
    ingress = find(objects, "Ingress", "slipway")
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "slipway-web", "port": {"name": "http"}}
    assert service["spec"]["ports"][0]["name"] == "http"
    web = find(objects, "Deployment", "slipway-web")
    assert service["spec"]["selector"].items() <= web["spec"]["template"]["metadata"]["labels"].items()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_namespaced_object_lives_in_the_slipway_namespace(rendered, overlay):
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for obj in rendered[overlay]:
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in obj["metadata"]
        else:
            assert obj["metadata"].get("namespace") == "slipway", f"{obj['kind']} {obj['metadata']['name']}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rbac_grants_exactly_the_verbs_the_cluster_module_uses(rendered, overlay):
    objects = rendered[overlay]
    cluster_role = find(objects, "ClusterRole", "slipway")
    role = find(objects, "Role", "slipway-leader-election")
    granted = _triples(cluster_role["rules"]) + _triples(role["rules"])
    needed = Counter((group, resource, verb) for group, resource, verbs in kube.RBAC_RULES for verb in verbs)
    assert set(granted) == set(needed), (
        f"missing from platform/: {sorted(set(needed) - set(granted))}; not used by builder/kube.py: {sorted(set(granted) - set(needed))}"
    )
    assert all(count == 1 for count in granted.values()), "a verb is granted twice"
    for rule in cluster_role["rules"] + role["rules"]:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_lease_is_granted_only_in_the_namespace_the_controller_elects_in(rendered, overlay):
    objects = rendered[overlay]
    cluster_role = find(objects, "ClusterRole", "slipway")
    assert all("leases" not in rule["resources"] for rule in cluster_role["rules"])
    role = find(objects, "Role", "slipway-leader-election")
    assert [r["resources"] for r in role["rules"]] == [["leases"]]
    controller = main_container(find(objects, "Deployment", "slipway-controller"))
    env = {e["name"]: e for e in controller.get("env", [])}
    assert env["SLIPWAY_CONTROLLER_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert find(objects, "Deployment", "slipway-controller")["metadata"]["namespace"] == role["metadata"]["namespace"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_roles_are_bound_to_the_account_the_pods_run_as(rendered, overlay):
    objects = rendered[overlay]
    subject = {"kind": "ServiceAccount", "name": "slipway", "namespace": "slipway"}
    assert find(objects, "ClusterRoleBinding", "slipway")["subjects"] == [subject]
    assert find(objects, "ClusterRoleBinding", "slipway")["roleRef"]["name"] == "slipway"
    assert find(objects, "RoleBinding", "slipway-leader-election")["subjects"] == [subject]
    for component, obj in slipway_workloads(objects).items():
        assert pod_spec(obj)["serviceAccountName"] == "slipway", component
    migrate = pod_spec(find(objects, "Job", "slipway-migrate"))
    assert migrate["automountServiceAccountToken"] is False


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_meets_the_restricted_pod_security_standard(rendered, overlay):
    namespace = find(rendered[overlay], "Namespace", "slipway")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for obj in workloads(rendered[overlay]):
        spec = pod_spec(obj)
        where = obj["metadata"]["name"]
        pod_sc = spec["securityContext"]
        assert pod_sc["runAsNonRoot"] is True, where
        assert pod_sc["runAsUser"] > 0, where
        assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC"), where
        assert all("hostPath" not in v for v in spec.get("volumes", [])), where
        for container in spec.get("initContainers", []) + spec["containers"]:
            sc = container["securityContext"]
            label = f"{where}/{container['name']}"
            assert sc["allowPrivilegeEscalation"] is False, label
            assert sc["readOnlyRootFilesystem"] is True, label
            assert sc["capabilities"] == {"drop": ["ALL"]}, label
            assert not sc.get("privileged"), label
            assert "ports" not in container or all("hostPort" not in p for p in container["ports"]), label


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_has_requests_and_limits_and_a_writable_tmp_only(rendered, overlay):
    for obj in workloads(rendered[overlay]):
        spec = pod_spec(obj)
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for container in spec.get("initContainers", []) + spec["containers"]:
            label = f"{obj['metadata']['name']}/{container['name']}"
            resources = container["resources"]
            assert set(resources["requests"]) == {"cpu", "memory"}, label
            assert set(resources["limits"]) == {"cpu", "memory"}, label
            for mount in container.get("volumeMounts", []):
                volume = volumes.get(mount["name"])
                if volume is None:  # the StatefulSet's own claim
                    claims = [c["metadata"]["name"] for c in obj["spec"].get("volumeClaimTemplates", [])]
                    assert mount["name"] in claims, label
                else:
                    assert "emptyDir" in volume, label


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_slipway_containers_keep_the_image_entrypoint_and_read_settings_from_the_configmap_and_secret(rendered, overlay):
    objects = rendered[overlay]
    config_map = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("slipway-config"))
    for component, obj in slipway_workloads(objects).items():
        spec = pod_spec(obj)
        for container in spec.get("initContainers", []) + spec["containers"]:
            label = f"{component}/{container['name']}"
            # `command` would replace tini, the image's ENTRYPOINT.
            assert "command" not in container and container["args"], label
            assert container["image"] == "slipway:0.1.0", label
            assert container["envFrom"] == [
                {"configMapRef": {"name": config_map["metadata"]["name"]}},
                {"secretRef": {"name": "slipway-secrets"}},
            ], label
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert mounts == {"/tmp"}, label


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_configmap_key_is_a_setting_slipway_reads(rendered, overlay):
    config_map = next(
        o for o in rendered[overlay] if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("slipway-config")
    )
    unknown = set(config_map["data"]) - settings_env_vars() - OTHER_ENV
    assert unknown == set(), "not read by config/settings.py (a typo?)"
    assert not set(config_map["data"]) & SECRET_KEYS, "secrets belong in the Secret"
    # The web's probes send Host: localhost, so it must be allowed.
    assert "localhost" in config_map["data"]["SLIPWAY_ALLOWED_HOSTS"].split(",")
    assert config_map["data"]["SLIPWAY_STATE_DIR"].startswith("/tmp/")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_web_is_probed_on_healthz_and_readyz_and_the_others_on_their_heartbeat(rendered, overlay):
    found = slipway_workloads(rendered[overlay])
    web = main_container(found["web"])
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in ("livenessProbe", "startupProbe", "readinessProbe"):
        assert web[probe]["httpGet"]["httpHeaders"] == [{"name": "Host", "value": "localhost"}]
        assert web[probe]["httpGet"]["port"] == "http"
    for name in ("worker", "beat", "controller"):
        container = main_container(found[name])
        for probe in ("livenessProbe", "startupProbe"):
            assert container[probe]["exec"]["command"] == ["python", "-m", "config.liveness", name]
            assert container[probe]["timeoutSeconds"] >= 5


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_worker_beat_and_controller_wait_for_migrations_and_beat_never_runs_twice(rendered, overlay):
    found = slipway_workloads(rendered[overlay])
    for name in ("worker", "beat", "controller"):
        init = pod_spec(found[name])["initContainers"]
        assert [c["name"] for c in init] == ["wait-for-migrations"]
        assert "manage.py migrate --check" in init[0]["args"][-1]
    assert found["beat"]["spec"]["replicas"] == 1
    assert found["beat"]["spec"]["strategy"] == {"type": "Recreate"}
    assert main_container(found["migrate"])["args"] == ["python", "manage.py", "migrate", "--noinput"]
    assert pod_spec(found["migrate"])["restartPolicy"] == "Never"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_platform_object_looks_like_an_app_slipway_manages(rendered, overlay):
    # The controller watches everything labelled managed-by=slipway as app objects.
    for obj in rendered[overlay]:
        labels = obj["metadata"].get("labels", {})
        assert labels.get(specs.LABEL_MANAGED_BY) != specs.MANAGED_BY, f"{obj['kind']} {obj['metadata']['name']}"
        template = (obj.get("spec") or {}).get("template", {}).get("metadata", {}).get("labels", {})
        assert template.get(specs.LABEL_MANAGED_BY) != specs.MANAGED_BY


def test_the_trial_bundles_postgresql_and_redis_and_points_nothing_outside(rendered):
    objects = rendered["trial"]
    postgres = find(objects, "StatefulSet", "slipway-postgres")
    assert postgres["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "10Gi"
    env = {e["name"]: e for e in main_container(postgres)["env"]}
    assert env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "slipway-secrets", "key": "POSTGRES_PASSWORD"}
    assert find(objects, "Service", "slipway-postgres")["spec"]["ports"][0]["port"] == 5432
    assert find(objects, "Deployment", "slipway-redis")
    assert find(objects, "Service", "slipway-redis")["spec"]["ports"][0]["port"] == 6379
    assert not [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    assert find(objects, "Deployment", "slipway-web")["spec"]["replicas"] == 1


def test_production_runs_two_webs_spread_and_protected_and_elects_one_controller(rendered):
    objects = rendered["production"]
    assert not [
        o
        for o in objects
        if o["kind"] in ("StatefulSet",) or "postgres" in o["metadata"]["name"] or "redis" in o["metadata"]["name"]
    ]
    web = find(objects, "Deployment", "slipway-web")
    assert web["spec"]["replicas"] == 2
    assert pod_spec(web)["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    pdb = find(objects, "PodDisruptionBudget", "slipway-web")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= web["spec"]["template"]["metadata"]["labels"].items()
    assert find(objects, "Deployment", "slipway-controller")["spec"]["replicas"] == 2
    config_map = next(o for o in objects if o["kind"] == "ConfigMap")
    assert config_map["data"]["SLIPWAY_LEADER_ELECTION"] == "true"


def test_the_overlays_read_the_same_secret_keys_the_install_guide_creates(rendered):
    guide = (PLATFORM.parent / "docs" / "install.md").read_text()
    for key in SECRET_KEYS | {"POSTGRES_PASSWORD"}:
        assert f"--from-literal={key}=" in guide, f"docs/install.md never sets {key}"
    assert "slipway-secrets" in guide
