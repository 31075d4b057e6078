"""Run the rendered step containers' scripts for real on this host, the way the local cluster does.

Mount paths are remapped to temporary folders (in env values and command strings alike);
git and the git servers are real; `railpack` and `buildctl-daemonless.sh` are small stand-ins
on PATH that behave like the real tools at their command-line seam.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from builder.jobs import (
    BUILD,
    CLONE,
    EXIT_ACCESS_DENIED,
    EXIT_COMMIT_NOT_FOUND,
    EXIT_NO_DOCKERFILE,
    EXIT_TRANSIENT,
    PLAN,
    SCRATCH,
    WORKSPACE,
    classify_build_failure,
    parse_termination_message,
    render_build_job,
)
from builder.specs import BuildSettings, BuildSpec
from tests.builder.conftest import GIT_TOKEN, GIT_USER, GitServers
from tests.support.git import GitSshServer

DIGEST = "sha256:" + "4e" * 32


def make_spec(repo_url: str, commit: str, **overrides: object) -> BuildSpec:
    values: dict[str, object] = {
        "app": "shop",
        "deployment_number": 3,
        "namespace": "slipway-builds",
        "repo_url": repo_url,
        "commit_sha": commit,
        "branch": "main",
        "registry": "127.0.0.1:5000",
    }
    values.update(overrides)
    return BuildSpec(**values)  # type: ignore[arg-type]


def container(spec: BuildSpec, name: str) -> dict:
    pod = render_build_job(spec, BuildSettings())[0]["spec"]["template"]["spec"]
    return next(c for c in [*pod.get("initContainers", []), *pod["containers"]] if c["name"] == name)


def remap(value: str, mounts: dict[str, Path]) -> str:
    # One pass, longest mount path first, as the local cluster does.
    pattern = "|".join(re.escape(path) for path in sorted(mounts, key=len, reverse=True))
    return re.sub(pattern, lambda match: str(mounts[match.group(0)]), value)


def run_on_host(
    spec_container: dict,
    root: Path,
    *,
    secret_values: dict[str, str] | None = None,
    files: dict[str, dict[str, str]] | None = None,
    path_prefix: Path | None = None,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Path]]:
    """Run a container's command with its mounts remapped under ROOT; return the result and mounts."""
    mounts: dict[str, Path] = {}
    for mount in spec_container["volumeMounts"]:
        host = root / mount["name"]
        host.mkdir(parents=True, exist_ok=True)
        mounts[mount["mountPath"]] = host
        for name, content in (files or {}).get(mount["name"], {}).items():
            (host / name).write_text(content)
    env = {"PATH": f"{path_prefix}:{os.environ['PATH']}" if path_prefix else os.environ["PATH"]}
    for entry in spec_container["env"]:
        if "value" in entry:
            env[entry["name"]] = remap(entry["value"], mounts)
        else:
            key = entry["valueFrom"]["secretKeyRef"]["key"]
            env[entry["name"]] = (secret_values or {})[key]
    argv = [remap(part, mounts) for part in [*spec_container["command"], *spec_container.get("args", [])]]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    return result, mounts


def stand_in(bin_dir: Path, name: str, script: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    target = bin_dir / name
    target.write_text("#!/bin/sh\n" + script)
    target.chmod(target.stat().st_mode | stat.S_IXUSR)


# ---- clone --------------------------------------------------------------------------------


def test_clone_fetches_exactly_the_commit_over_git_protocol(git_servers: GitServers, tmp_path: Path) -> None:
    first = git_servers.repo.commits["main"][0]
    spec = make_spec(git_servers.daemon.url("shop.git"), first)
    result, mounts = run_on_host(container(spec, CLONE), tmp_path)
    assert result.returncode == 0, result.stderr
    source = mounts[WORKSPACE] / "src"
    assert sorted(os.listdir(source)) == ["README.md"]
    assert f"Checked out {first[:7]}: Start the shop" in result.stdout


def test_clone_uses_the_token_from_the_mounted_secret_without_printing_it(git_servers: GitServers, tmp_path: Path) -> None:
    head = git_servers.repo.head()
    spec = make_spec(
        git_servers.http.url("shop.git"), head, git_credentials_secret="shop-build-3-git", git_credentials_kind="token"
    )
    result, mounts = run_on_host(
        container(spec, CLONE),
        tmp_path,
        files={"git-credentials": {"username": GIT_USER, "password": GIT_TOKEN}},
    )
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(mounts[WORKSPACE] / "src")) == ["README.md", "app.py"]
    assert GIT_TOKEN not in result.stdout + result.stderr
    # The helper and its private folder are gone once the step ends.
    assert not (mounts[SCRATCH] / "git-auth").exists()


def test_clone_with_a_wrong_token_fails_as_access_denied(git_servers: GitServers, tmp_path: Path) -> None:
    spec = make_spec(
        git_servers.http.url("shop.git"),
        git_servers.repo.head(),
        git_credentials_secret="shop-build-3-git",
        git_credentials_kind="token",
    )
    result, _ = run_on_host(container(spec, CLONE), tmp_path, files={"git-credentials": {"password": "wrong"}})
    assert result.returncode == EXIT_ACCESS_DENIED
    message = classify_build_failure(CLONE, result.returncode, result.stdout + result.stderr)
    assert message == f"clone failed: repository {git_servers.http.url('shop.git')} not found or access denied"


def test_clone_uses_a_deploy_key_and_the_known_hosts_from_the_secret(
    git_servers: GitServers, git_ssh: GitSshServer, tmp_path: Path
) -> None:
    spec = make_spec(
        git_ssh.url(git_servers.repo.path),
        git_servers.repo.head(),
        git_credentials_secret="shop-build-3-git",
        git_credentials_kind="ssh",
    )
    files = {"git-credentials": {"ssh-privatekey": git_ssh.private_key, "known_hosts": git_ssh.known_hosts}}
    result, mounts = run_on_host(container(spec, CLONE), tmp_path, files=files)
    assert result.returncode == 0, result.stderr
    assert (mounts[WORKSPACE] / "src" / "app.py").exists()
    assert "PRIVATE KEY" not in result.stdout + result.stderr


def test_clone_refuses_a_server_whose_host_key_does_not_match(
    git_servers: GitServers, git_ssh: GitSshServer, tmp_path: Path
) -> None:
    spec = make_spec(
        git_ssh.url(git_servers.repo.path),
        git_servers.repo.head(),
        git_credentials_secret="shop-build-3-git",
        git_credentials_kind="ssh",
    )
    other = f"[127.0.0.1]:{git_ssh.port} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
    files = {"git-credentials": {"ssh-privatekey": git_ssh.private_key, "known_hosts": other}}
    result, _ = run_on_host(container(spec, CLONE), tmp_path, files=files)
    assert result.returncode == EXIT_ACCESS_DENIED
    assert "does not match the known hosts" in classify_build_failure(CLONE, result.returncode, result.stderr)


def test_clone_of_a_commit_that_does_not_exist_names_the_commit_and_branch(git_servers: GitServers, tmp_path: Path) -> None:
    spec = make_spec(git_servers.daemon.url("shop.git"), "3f2a9c1" + "0" * 33)
    result, _ = run_on_host(container(spec, CLONE), tmp_path)
    assert result.returncode == EXIT_COMMIT_NOT_FOUND
    assert (
        classify_build_failure(CLONE, result.returncode, result.stderr) == "clone failed: commit 3f2a9c1 not found on branch main"
    )


def test_clone_of_a_missing_repository_says_not_found_or_access_denied(git_servers: GitServers, tmp_path: Path) -> None:
    url = git_servers.daemon.url("nope.git")
    result, _ = run_on_host(container(make_spec(url, git_servers.repo.head()), CLONE), tmp_path)
    assert result.returncode == EXIT_ACCESS_DENIED
    assert (
        classify_build_failure(CLONE, result.returncode, result.stderr)
        == f"clone failed: repository {url} not found or access denied"
    )


def test_clone_of_an_unreachable_repository_is_transient(tmp_path: Path) -> None:
    url = "git://127.0.0.1:9/shop.git"
    result, _ = run_on_host(container(make_spec(url, "a" * 40), CLONE), tmp_path)
    assert result.returncode == EXIT_TRANSIENT
    assert classify_build_failure(CLONE, result.returncode, result.stderr) == f"clone failed: repository {url} unreachable"


def test_clone_accepts_a_local_path(git_servers: GitServers, tmp_path: Path) -> None:
    spec = make_spec(str(git_servers.repo.path), git_servers.repo.head())
    result, mounts = run_on_host(container(spec, CLONE), tmp_path)
    assert result.returncode == 0, result.stderr
    assert (mounts[WORKSPACE] / "src" / "app.py").exists()


# ---- plan ---------------------------------------------------------------------------------

RAILPACK_OK = """
echo "$@" > "$SLIPWAY_PLAN_DIR/args"
echo "NPM_TOKEN=$NPM_TOKEN" > "$SLIPWAY_PLAN_DIR/env"
while [ $# -gt 0 ]; do
  case "$1" in
  --plan-out) echo '{"steps": []}' > "$2"; shift ;;
  --info-out) echo '{"success": true}' > "$2"; shift ;;
  esac
  shift
done
echo "Railpack 0.17.1"
"""

RAILPACK_NO_START = """
echo "Railpack 0.17.1"
echo "  ↳ Detected Node"
echo "  ✖ No start command detected. Specify a start command: https://railpack.com/config/file"
exit 1
"""

RAILPACK_NETWORK = """
echo "  ✖ failed to resolve version for node: Get \\"https://nodejs.org/dist/index.json\\": dial tcp: i/o timeout"
exit 1
"""


def plan_spec() -> BuildSpec:
    return make_spec("https://git.example.com/acme/shop.git", "a" * 40, build_env_names=("NPM_TOKEN",), build_env_secret="env")


def test_plan_passes_build_env_names_to_railpack_and_values_only_through_its_environment(tmp_path: Path) -> None:
    stand_in(tmp_path / "bin", "railpack", RAILPACK_OK)
    result, mounts = run_on_host(
        container(plan_spec(), PLAN), tmp_path / "pod", secret_values={"NPM_TOKEN": "npm_s3cret"}, path_prefix=tmp_path / "bin"
    )
    assert result.returncode == 0, result.stderr
    plan_dir = mounts[WORKSPACE] / "plan"
    args = (plan_dir / "args").read_text()
    assert args.startswith(f"prepare {mounts[WORKSPACE]}/src --plan-out")
    assert "--error-missing-start" in args
    assert "--env NPM_TOKEN" in args
    assert "npm_s3cret" not in args
    assert (plan_dir / "env").read_text().strip() == "NPM_TOKEN=npm_s3cret"
    assert (plan_dir / "railpack-plan.json").exists()


def test_plan_reports_railpacks_own_message_when_there_is_no_start_command(tmp_path: Path) -> None:
    stand_in(tmp_path / "bin", "railpack", RAILPACK_NO_START)
    result, _ = run_on_host(
        container(plan_spec(), PLAN), tmp_path / "pod", secret_values={"NPM_TOKEN": "x"}, path_prefix=tmp_path / "bin"
    )
    assert result.returncode == 1
    assert classify_build_failure(PLAN, 1, result.stdout + result.stderr) == "plan failed: Railpack found no start command"


def test_plan_exits_75_on_a_network_error_worth_one_retry(tmp_path: Path) -> None:
    stand_in(tmp_path / "bin", "railpack", RAILPACK_NETWORK)
    result, _ = run_on_host(
        container(plan_spec(), PLAN), tmp_path / "pod", secret_values={"NPM_TOKEN": "x"}, path_prefix=tmp_path / "bin"
    )
    assert result.returncode == EXIT_TRANSIENT


# ---- build --------------------------------------------------------------------------------

# What `buildctl --metadata-file` writes after a push (github.com/moby/buildkit, docs "Metadata").
BUILDCTL_OK = """
printf '%s\\n' "$@" > "$SLIPWAY_WORKSPACE/buildctl-args"
env > "$SLIPWAY_WORKSPACE/buildctl-env"
for arg in "$@"; do
  case "$arg" in
  --metadata-file=*) meta="${arg#--metadata-file=}" ;;
  esac
done
cat > "$meta" <<EOF
{
  "buildx.build.ref": "builder/builder0/abc",
  "containerimage.config.digest": "sha256:2937f66a9722f7f4a2df583de2f8cb97fc9196059a410e7f00072fc918930e66",
  "containerimage.descriptor": {
    "annotations": {"config.digest": "sha256:2937f66a9722f7f4a2df583de2f8cb97fc9196059a410e7f00072fc918930e66"},
    "digest": "DIGEST",
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "size": 506
  },
  "containerimage.digest": "DIGEST",
  "image.name": "127.0.0.1:5000/shop:aaaa"
}
EOF
""".replace("DIGEST", DIGEST)

BUILDCTL_STEP_FAILS = """
echo '#12 [install 2/2] RUN npm ci'
echo '#12 0.912 npm ERR! code E404'
echo '#12 ERROR: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1'
echo 'error: failed to solve: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1' >&2
exit 1
"""


def build_pod(spec: BuildSpec, tmp_path: Path, buildctl: str, **kwargs: object) -> tuple[subprocess.CompletedProcess[str], dict]:
    stand_in(tmp_path / "bin", "buildctl-daemonless.sh", buildctl)
    build = container(spec, BUILD)
    for entry in build["env"]:
        if entry["name"] == "SLIPWAY_TERMINATION_LOG":
            entry["value"] = str(tmp_path / "termination-log")
    return run_on_host(build, tmp_path / "pod", path_prefix=tmp_path / "bin", **kwargs)  # type: ignore[arg-type]


def test_build_reports_the_pushed_digest_as_its_termination_message(tmp_path: Path) -> None:
    spec = make_spec("https://git.example.com/acme/shop.git", "a" * 40, registry_insecure=True)
    result, mounts = build_pod(spec, tmp_path, BUILDCTL_OK)
    assert result.returncode == 0, result.stderr
    message = (tmp_path / "termination-log").read_text()
    assert json.loads(message) == {"image": f"127.0.0.1:5000/shop@{DIGEST}", "digest": DIGEST}
    assert parse_termination_message(message).image == f"127.0.0.1:5000/shop@{DIGEST}"
    # Plain HTTP for the loopback registry reaches buildkitd through its config file.
    env = (mounts[WORKSPACE] / "buildctl-env").read_text()
    assert f"--config={mounts[WORKSPACE]}/buildkitd.toml" in env
    assert '[registry."127.0.0.1:5000"]' in (mounts[WORKSPACE] / "buildkitd.toml").read_text()


def test_build_passes_build_env_as_buildkit_secrets_and_hashes_their_values(tmp_path: Path) -> None:
    spec = make_spec(
        "https://git.example.com/acme/shop.git", "a" * 40, build_env_names=("NPM_TOKEN", "API_KEY"), build_env_secret="env"
    )
    values = {"NPM_TOKEN": "npm_s3cret", "API_KEY": "key_s3cret"}
    result, mounts = build_pod(spec, tmp_path, BUILDCTL_OK, secret_values=values)
    assert result.returncode == 0, result.stderr
    args = (mounts[WORKSPACE] / "buildctl-args").read_text().splitlines()
    assert "id=NPM_TOKEN,env=SLIPWAY_SECRET_NPM_TOKEN" in args
    assert "id=API_KEY,env=SLIPWAY_SECRET_API_KEY" in args
    hashes = [a for a in args if a.startswith("build-arg:secrets-hash=")]
    assert len(hashes) == 1 and len(hashes[0].split("=", 1)[1]) == 64
    assert not any("s3cret" in arg for arg in args)


def test_a_changed_build_env_value_changes_the_secrets_hash(tmp_path: Path) -> None:
    spec = make_spec("https://git.example.com/acme/shop.git", "a" * 40, build_env_names=("NPM_TOKEN",), build_env_secret="env")
    hashes = []
    for number, value in enumerate(("one", "two")):
        _, mounts = build_pod(spec, tmp_path / str(number), BUILDCTL_OK, secret_values={"NPM_TOKEN": value})
        args = (mounts[WORKSPACE] / "buildctl-args").read_text().splitlines()
        hashes.append(next(a for a in args if a.startswith("build-arg:secrets-hash=")))
    assert hashes[0] != hashes[1]


def test_a_failing_build_step_is_named_with_its_exit_code(tmp_path: Path) -> None:
    result, _ = build_pod(make_spec("https://git.example.com/acme/shop.git", "a" * 40), tmp_path, BUILDCTL_STEP_FAILS)
    assert result.returncode == 1
    assert not (tmp_path / "termination-log").exists()
    assert classify_build_failure(BUILD, 1, result.stdout + result.stderr) == "build failed: step `npm ci` exited 1"


def test_a_dockerfile_build_without_the_dockerfile_says_where_it_looked(tmp_path: Path) -> None:
    spec = make_spec("https://git.example.com/acme/shop.git", "a" * 40, builder="dockerfile", dockerfile_path="deploy/Dockerfile")
    result, _ = build_pod(spec, tmp_path, BUILDCTL_OK)
    assert result.returncode == EXIT_NO_DOCKERFILE
    assert (
        classify_build_failure(BUILD, result.returncode, result.stderr)
        == "build failed: no Dockerfile at deploy/Dockerfile in the repository"
    )


@pytest.mark.parametrize("name", [CLONE, PLAN, BUILD])
def test_scripts_name_paths_only_through_env_or_mounts(name: str) -> None:
    spec = make_spec("https://git.example.com/acme/shop.git", "a" * 40)
    script = container(spec, name)["command"][2]
    mount_paths = [m["mountPath"] for m in container(spec, name)["volumeMounts"]]
    for mount_path in mount_paths:
        assert mount_path not in script
