"""The build Job renderer: shape, security, secrets handling and schema validity."""

from __future__ import annotations

import json
from dataclasses import replace

import kubernetes_validate
import pytest

from builder.jobs import (
    BUILD,
    CLONE,
    PLAN,
    BuildJobError,
    build_env_secret_name,
    build_job_name,
    git_credentials_secret_name,
    owner_references,
    parse_termination_message,
    render_build_job,
    render_build_secrets,
    with_owner,
)
from builder.specs import BuildSettings, BuildSpec, selector

SHA = "3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"
DIGEST = "sha256:" + "ab" * 32
SETTINGS = BuildSettings()

# Current Kubernetes strictly, and the oldest schema the package ships loosely: the testbed's
# 1.20 API server drops fields it does not know, which strict validation would reject.
VERSIONS = [("1.25", False), ("1.30", True), ("1.37", True)]


def make_spec(**overrides: object) -> BuildSpec:
    values: dict[str, object] = {
        "app": "shop",
        "deployment_number": 7,
        "namespace": "slipway-builds",
        "repo_url": "https://git.example.com/acme/shop.git",
        "commit_sha": SHA,
        "branch": "main",
        "registry": "registry.example.com",
    }
    values.update(overrides)
    return BuildSpec(**values)  # type: ignore[arg-type]


SPECS = {
    "railpack, public repository": make_spec(),
    "railpack, token, build env, private registry": make_spec(
        git_credentials_secret=git_credentials_secret_name("shop", 7),
        git_credentials_kind="token",
        build_env_names=("NPM_TOKEN", "SENTRY_AUTH_TOKEN"),
        build_env_secret=build_env_secret_name("shop", 7),
        registry_secret="slipway-registry",
    ),
    "dockerfile, ssh key, insecure loopback registry": make_spec(
        builder="dockerfile",
        dockerfile_path="docker/Dockerfile.prod",
        git_credentials_secret=git_credentials_secret_name("shop", 7),
        git_credentials_kind="ssh",
        registry="127.0.0.1:5000",
        registry_insecure=True,
    ),
}


def job_of(spec: BuildSpec) -> dict:
    objects = render_build_job(spec, SETTINGS)
    assert [o["kind"] for o in objects] == ["Job"]
    return objects[0]


def containers(job: dict) -> dict[str, dict]:
    pod = job["spec"]["template"]["spec"]
    return {c["name"]: c for c in [*pod.get("initContainers", []), *pod["containers"]]}


def env_of(container: dict) -> dict[str, object]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize(("version", "strict"), VERSIONS)
def test_every_rendered_object_is_valid_kubernetes(name: str, version: str, strict: bool) -> None:
    spec = SPECS[name]
    objects = render_build_job(spec, SETTINGS)
    objects += [
        with_owner(secret, job_name=build_job_name("shop", 7), job_uid="0b5c3a5e-1111-4222-8333-444455556666")
        for secret in render_build_secrets(
            spec,
            git_credentials={"password": "t0ken"} if spec.git_credentials_kind == "token" else {"ssh-privatekey": "KEY"},
            build_env={"NPM_TOKEN": "npm-secret", "SENTRY_AUTH_TOKEN": "sentry-secret"},
        )
    ]
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=strict)


def test_it_names_the_job_after_the_app_and_deployment() -> None:
    job = job_of(make_spec())
    assert job["metadata"]["name"] == "shop-build-7"
    assert job["metadata"]["namespace"] == "slipway-builds"


def test_it_keeps_long_job_names_within_a_label_value() -> None:
    name = build_job_name("a" * 63, 12345)
    assert len(name) <= 63
    assert name.endswith("-build-12345")
    assert name != build_job_name("a" * 62 + "b", 12345)


def test_it_labels_the_job_and_its_pod_with_app_deployment_and_component() -> None:
    job = job_of(make_spec(labels={"team": "acme"}))
    expected = {
        "app.kubernetes.io/managed-by": "slipway",
        "slipway.dev/app": "shop",
        "slipway.dev/deployment": "7",
        "slipway.dev/component": "build",
        "team": "acme",
    }
    assert job["metadata"]["labels"] == expected
    assert job["spec"]["template"]["metadata"]["labels"] == expected
    assert selector(app="shop", deployment=7, component="build") == (
        "app.kubernetes.io/managed-by=slipway,slipway.dev/app=shop,slipway.dev/deployment=7,slipway.dev/component=build"
    )


def test_it_runs_clone_then_plan_then_build_on_one_workspace() -> None:
    job = job_of(make_spec())
    pod = job["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == [CLONE, PLAN]
    assert [c["name"] for c in pod["containers"]] == [BUILD]
    assert pod["restartPolicy"] == "Never"
    workspace = [v for v in pod["volumes"] if v["name"] == "workspace"]
    assert workspace == [{"name": "workspace", "emptyDir": {"sizeLimit": SETTINGS.workspace_size_limit}}]
    for container in containers(job).values():
        assert {"name": "workspace", "mountPath": "/slipway/workspace"} in container["volumeMounts"]


def test_it_bounds_the_job_with_a_deadline_no_retries_and_a_ttl() -> None:
    spec = job_of(make_spec())["spec"]
    assert spec["backoffLimit"] == 0
    assert spec["activeDeadlineSeconds"] == SETTINGS.active_deadline_seconds
    assert spec["ttlSecondsAfterFinished"] == SETTINGS.ttl_seconds_after_finished


def test_every_container_carries_the_repository_and_commit() -> None:
    for container in containers(job_of(make_spec())).values():
        env = env_of(container)
        assert env["SLIPWAY_REPO_URL"] == "https://git.example.com/acme/shop.git"
        assert env["SLIPWAY_COMMIT"] == SHA


def test_every_container_has_requests_and_limits() -> None:
    for container in containers(job_of(make_spec())).values():
        assert set(container["resources"]) == {"requests", "limits"}
        assert set(container["resources"]["limits"]) == {"cpu", "memory"}


def test_no_container_is_privileged_and_all_run_as_uid_1000() -> None:
    job = job_of(make_spec())
    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 1000
    assert pod["automountServiceAccountToken"] is False
    for container in containers(job).values():
        context = container["securityContext"]
        assert context["privileged"] is False
        assert context["runAsUser"] == 1000
        assert context["runAsGroup"] == 1000


def test_clone_and_plan_drop_every_capability() -> None:
    for name in (CLONE, PLAN):
        context = containers(job_of(make_spec()))[name]["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["readOnlyRootFilesystem"] is True


def test_buildkit_runs_rootless_with_unconfined_seccomp_and_apparmor_in_both_forms() -> None:
    job = job_of(make_spec())
    build = containers(job)[BUILD]
    assert build["image"] == SETTINGS.buildkit_image
    assert build["image"].endswith("-rootless")
    assert env_of(build)["BUILDKITD_FLAGS"] == "--oci-worker-no-process-sandbox"
    assert build["securityContext"]["seccompProfile"] == {"type": "Unconfined"}
    assert "appArmorProfile" not in build["securityContext"]  # the annotation carries it (see jobs.py)
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert annotations["container.apparmor.security.beta.kubernetes.io/build"] == "unconfined"
    assert annotations["container.seccomp.security.alpha.kubernetes.io/build"] == "unconfined"


def test_the_frontend_and_the_cli_are_the_same_pinned_railpack_version() -> None:
    job = job_of(make_spec())
    plan = containers(job)[PLAN]
    build = containers(job)[BUILD]
    assert plan["image"] == f"ghcr.io/railwayapp/railpack-frontend:v{SETTINGS.railpack_version}"
    assert f"--opt=source={plan['image']}" in build["args"]
    assert "--frontend=gateway.v0" in build["args"]


def test_it_pushes_app_sha_and_uses_the_registry_as_cache() -> None:
    args = containers(job_of(make_spec()))[BUILD]["args"]
    assert f"--output=type=image,name=registry.example.com/shop:{SHA},push=true" in args
    assert "--import-cache=type=registry,ref=registry.example.com/shop:buildcache" in args
    assert "--export-cache=type=registry,ref=registry.example.com/shop:buildcache,mode=max,ignore-error=true" in args
    assert "--local=context=/slipway/workspace/src" in args
    assert "--local=dockerfile=/slipway/workspace/plan" in args


def test_no_default_image_is_latest_or_unpinned() -> None:
    images = [c["image"] for c in containers(job_of(make_spec())).values()]
    for image in images:
        tag = image.rsplit(":", 1)[1]
        assert tag != "latest"
        assert any(ch.isdigit() for ch in tag)
    with pytest.raises(ValueError, match="pinned"):
        BuildSettings(buildkit_image="moby/buildkit:latest")
    with pytest.raises(ValueError, match="pinned"):
        BuildSettings(git_image="alpine/git")


def test_a_dockerfile_build_skips_the_plan_and_uses_the_dockerfile_frontend() -> None:
    job = job_of(SPECS["dockerfile, ssh key, insecure loopback registry"])
    names = [c["name"] for c in job["spec"]["template"]["spec"]["initContainers"]]
    assert names == [CLONE]
    build = containers(job)[BUILD]
    assert "--frontend=dockerfile.v0" in build["args"]
    assert "--local=dockerfile=/slipway/workspace/src/docker" in build["args"]
    assert "--opt=filename=Dockerfile.prod" in build["args"]
    assert env_of(build)["SLIPWAY_DOCKERFILE"] == "docker/Dockerfile.prod"
    assert env_of(build)["SLIPWAY_INSECURE_REGISTRY"] == "127.0.0.1:5000"


def test_git_credentials_are_mounted_read_only_and_never_in_args_or_env_values() -> None:
    spec = SPECS["railpack, token, build env, private registry"]
    job = job_of(spec)
    clone = containers(job)[CLONE]
    mount = next(m for m in clone["volumeMounts"] if m["name"] == "git-credentials")
    assert mount["readOnly"] is True
    volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "git-credentials")
    assert volume["secret"]["secretName"] == "shop-build-7-git"
    assert env_of(clone)["SLIPWAY_GIT_AUTH"] == "token"
    assert "GIT_ASKPASS" in clone["command"][2]


def test_build_env_values_come_from_a_secret_and_names_reach_railpack() -> None:
    spec = SPECS["railpack, token, build env, private registry"]
    job = job_of(spec)
    for name in (PLAN, BUILD):
        env = env_of(containers(job)[name])
        assert env["SLIPWAY_BUILD_ENV_NAMES"] == "NPM_TOKEN SENTRY_AUTH_TOKEN"
        assert env["SLIPWAY_SECRET_NPM_TOKEN"] == {
            "secretKeyRef": {"name": "shop-build-7-env", "key": "NPM_TOKEN", "optional": False}
        }
    assert '--env "$name"' in containers(job)[PLAN]["command"][2]
    assert '--secret "id=$name,env=SLIPWAY_SECRET_$name"' in containers(job)[BUILD]["command"][2]


def test_no_secret_value_appears_anywhere_in_the_rendered_job() -> None:
    spec = SPECS["railpack, token, build env, private registry"]
    secrets = render_build_secrets(
        spec,
        git_credentials={"username": "alice", "password": "ghp_supersecret"},
        build_env={"NPM_TOKEN": "npm_supersecret", "SENTRY_AUTH_TOKEN": "sentry_supersecret"},
    )
    text = json.dumps(render_build_job(spec, SETTINGS))
    for value in ("ghp_supersecret", "npm_supersecret", "sentry_supersecret"):
        assert value not in text
        assert value in json.dumps(secrets)


def test_the_registry_config_is_mounted_as_docker_config() -> None:
    job = job_of(SPECS["railpack, token, build env, private registry"])
    build = containers(job)[BUILD]
    assert env_of(build)["DOCKER_CONFIG"] == "/var/run/secrets/slipway/registry"
    volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "registry-config")
    assert volume["secret"]["items"] == [{"key": ".dockerconfigjson", "path": "config.json"}]


def test_build_secrets_are_labelled_and_can_be_owned_by_the_job() -> None:
    spec = SPECS["railpack, token, build env, private registry"]
    secrets = render_build_secrets(
        spec, git_credentials={"password": "x"}, build_env={"NPM_TOKEN": "a", "SENTRY_AUTH_TOKEN": "b"}
    )
    assert [s["metadata"]["name"] for s in secrets] == ["shop-build-7-git", "shop-build-7-env"]
    for secret in secrets:
        assert secret["metadata"]["labels"]["slipway.dev/deployment"] == "7"
        owned = with_owner(secret, job_name="shop-build-7", job_uid="uid-1")
        assert owned["metadata"]["ownerReferences"] == owner_references(job_name="shop-build-7", job_uid="uid-1")
        assert "ownerReferences" not in secret["metadata"]


def test_build_secrets_refuse_missing_values() -> None:
    spec = SPECS["railpack, token, build env, private registry"]
    with pytest.raises(ValueError, match="NPM_TOKEN"):
        render_build_secrets(spec, git_credentials={"password": "x"}, build_env={"SENTRY_AUTH_TOKEN": "b"})
    with pytest.raises(ValueError, match="password"):
        render_build_secrets(spec, git_credentials={"username": "alice"}, build_env={})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"commit_sha": "3f2a9c1"}, "full hexadecimal SHA"),
        ({"app": "Shop"}, "DNS-1123"),
        ({"build_env_names": ("PATH",), "build_env_secret": "s"}, "reserved"),
        ({"build_env_names": ("SLIPWAY_X",), "build_env_secret": "s"}, "reserved"),
        ({"build_env_names": ("NPM_TOKEN",)}, "Secret that holds"),
        ({"git_credentials_secret": "s"}, "both"),
        ({"builder": "dockerfile", "dockerfile_path": "../Dockerfile"}, "inside the repository"),
        ({"labels": {"slipway.dev/app": "other"}}, "set by Slipway"),
    ],
)
def test_specs_refuse_what_would_render_a_broken_job(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_spec(**overrides)


def test_it_reads_the_digest_from_the_termination_message() -> None:
    result = parse_termination_message(json.dumps({"image": f"registry.example.com/shop@{DIGEST}", "digest": DIGEST}))
    assert result.image == f"registry.example.com/shop@{DIGEST}"
    assert result.digest == DIGEST


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        json.dumps({"image": "registry.example.com/shop:abc", "digest": DIGEST}),
        json.dumps({"image": "registry.example.com/shop@sha256:12", "digest": "sha256:12"}),
        json.dumps(["registry.example.com/shop"]),
    ],
)
def test_it_refuses_a_termination_message_without_a_pinned_image(text: str) -> None:
    with pytest.raises(BuildJobError) as info:
        parse_termination_message(text)
    assert info.value.permanent is True


def test_settings_can_change_versions_without_touching_code() -> None:
    settings = replace(SETTINGS, railpack_version="0.18.0", active_deadline_seconds=600)
    job = render_build_job(make_spec(), settings)[0]
    assert containers(job)[PLAN]["image"].endswith(":v0.18.0")
    assert job["spec"]["activeDeadlineSeconds"] == 600
