"""Render the build Job of a deployment, and read what a finished or failed build says.

The Job is one pod that runs three steps on one shared emptyDir workspace:

- init container `clone`: fetch exactly the deployment's commit, shallow, into the workspace;
- init container `plan`: `railpack prepare` writes the build plan and info into the workspace
  (skipped for Dockerfile builds);
- container `build`: rootless BuildKit builds the plan with the Railpack frontend (or the
  Dockerfile) and pushes REGISTRY/APP:SHA; it reports the pushed digest through its
  termination message as `{"image": "REGISTRY/APP@sha256:…", "digest": "sha256:…"}`.

Per-build Secrets (git credentials, build-time variable values) are rendered apart by
`render_build_secrets` and must be collected with the Job. An owner reference needs the Job's
uid, which exists only once the Job is created, so the caller:

1. creates the Secrets (labelled with the app and deployment, no owner yet);
2. creates the Job (its pod waits for the Secrets it mounts, so the order matters);
3. patches each Secret with `owner_references(job_name=…, job_uid=…)`.

A crash between 2 and 3 leaves Secrets that the label selector
`selector(app=…, deployment=…, component="build")` still finds, so clean-up can delete them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from builder.specs import (
    COMPONENT_BUILD,
    BuildSettings,
    BuildSpec,
    base_labels,
)

CLONE = "clone"
PLAN = "plan"
BUILD = "build"
PUSH = "push"
STEPS = (CLONE, PLAN, BUILD, PUSH)

# Paths inside the pod. The local cluster runs the clone container on the host and remaps
# mount paths (also inside strings), so scripts name paths only through env or these mounts.
# They sit under /slipway so that no repository path (a local one in tests) starts with one.
WORKSPACE = "/slipway/workspace"
SOURCE_DIR = f"{WORKSPACE}/src"
PLAN_DIR = f"{WORKSPACE}/plan"
METADATA_FILE = f"{WORKSPACE}/build-metadata.json"
SCRATCH = "/slipway/scratch"
# Railpack unpacks its tools under /tmp; the plan step gets its own emptyDir there.
PLAN_TMP = "/tmp"  # noqa: S108 - a pod-private emptyDir, not the node's /tmp
GIT_CREDENTIALS_DIR = "/var/run/secrets/slipway/git"
REGISTRY_CONFIG_DIR = "/var/run/secrets/slipway/registry"
# The rootless image declares this as a volume; an emptyDir avoids overlay-on-overlay.
BUILDKIT_STATE_DIR = "/home/user/.local/share/buildkit"
TERMINATION_LOG = "/dev/termination-log"

# Exit codes of Slipway's own step scripts, so the failure needs no guessing from logs.
EXIT_ACCESS_DENIED = 10
EXIT_COMMIT_NOT_FOUND = 11
EXIT_BAD_CREDENTIALS = 12
EXIT_NO_DOCKERFILE = 66
EXIT_NO_DIGEST = 70
# EX_TEMPFAIL from sysexits.h: a network hiccup that one more try may get past.
EXIT_TRANSIENT = 75

BUILD_UID = 1000
SECRET_ENV_PREFIX = "SLIPWAY_SECRET_"

_MAX_NAME = 63


class BuildJobError(Exception):
    """A build Job's output could not be read; `permanent` says whether a retry can help."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


@dataclass(frozen=True)
class BuildResult:
    """What a successful build reports: the pushed image pinned by digest."""

    image: str
    digest: str


@dataclass(frozen=True)
class BuildFailure:
    """Why a build failed, in words a person can act on."""

    step: str
    message: str
    transient: bool = False


def build_job_name(app: str, deployment_number: int) -> str:
    """Return `<app>-build-<number>`, shortened with a hash to fit a label value."""
    name = f"{app}-build-{deployment_number}"
    if len(name) <= _MAX_NAME:
        return name
    # The Job controller copies the name into the pod's `job-name` label (63 characters).
    digest = hashlib.sha256(name.encode()).hexdigest()[:6]
    suffix = f"-{digest}-build-{deployment_number}"
    return app[: _MAX_NAME - len(suffix)].rstrip("-") + suffix


def git_credentials_secret_name(app: str, deployment_number: int) -> str:
    """Return the name of the per-build Secret holding git credentials."""
    return f"{build_job_name(app, deployment_number)}-git"


def build_env_secret_name(app: str, deployment_number: int) -> str:
    """Return the name of the per-build Secret holding build-time variable values."""
    return f"{build_job_name(app, deployment_number)}-env"


def cache_ref(spec: BuildSpec, settings: BuildSettings) -> str:
    """Return the registry reference that holds the app's BuildKit cache."""
    return f"{spec.repository}:{settings.cache_tag}"


# POSIX sh, git and coreutils only: the local cluster runs this very script on the host.
CLONE_SCRIPT = r"""set -eu
die() {
  code=$1
  shift
  printf 'clone failed: %s\n' "$*" >&2
  exit "$code"
}
# Slipway refuses repository URLs with user info; strip it anyway before printing.
shown=$(printf '%s' "$SLIPWAY_REPO_URL" | sed -e 's#^\([A-Za-z+]*://\)[^/@]*@#\1#')
short=$(printf '%s' "$SLIPWAY_COMMIT" | cut -c1-7)
private="$SLIPWAY_SCRATCH/git-auth"
rm -rf "$private"
(umask 077 && mkdir -p "$private")
trap 'rm -rf "$private"' EXIT
case "${SLIPWAY_GIT_AUTH:-none}" in
token)
  [ -s "$SLIPWAY_GIT_CREDENTIALS/password" ] ||
    die 12 "the git credentials Secret has no password key"
  # The helper reads the mounted Secret when git asks, so the token never enters
  # arguments, the environment or this log.
  cat >"$private/askpass" <<'ASKPASS'
#!/bin/sh
case "$1" in
Username*)
  if [ -s "$SLIPWAY_GIT_CREDENTIALS/username" ]; then
    cat "$SLIPWAY_GIT_CREDENTIALS/username"
  else
    echo x-access-token
  fi
  ;;
*) cat "$SLIPWAY_GIT_CREDENTIALS/password" ;;
esac
ASKPASS
  chmod 700 "$private/askpass"
  GIT_ASKPASS="$private/askpass"
  export GIT_ASKPASS
  ;;
ssh)
  [ -s "$SLIPWAY_GIT_CREDENTIALS/ssh-privatekey" ] ||
    die 12 "the git credentials Secret has no ssh-privatekey key"
  # ssh refuses a key that others can read; Secret volumes are group-readable.
  (umask 077 && cp "$SLIPWAY_GIT_CREDENTIALS/ssh-privatekey" "$private/id")
  if [ -s "$SLIPWAY_GIT_CREDENTIALS/known_hosts" ]; then
    cp "$SLIPWAY_GIT_CREDENTIALS/known_hosts" "$private/known_hosts"
    strict=yes
  else
    : >"$private/known_hosts"
    strict=accept-new
  fi
  GIT_SSH_COMMAND="ssh -i $private/id -o IdentitiesOnly=yes -o BatchMode=yes"
  GIT_SSH_COMMAND="$GIT_SSH_COMMAND -o UserKnownHostsFile=$private/known_hosts -o StrictHostKeyChecking=$strict"
  export GIT_SSH_COMMAND
  ;;
esac
mkdir -p "$SLIPWAY_SOURCE_DIR"
cd "$SLIPWAY_SOURCE_DIR"
git init -q
git remote add origin "$SLIPWAY_REPO_URL"
echo "Fetching commit $short of $shown (branch $SLIPWAY_BRANCH)"
if git -c credential.helper= -c protocol.version=2 \
  fetch --depth 1 --no-tags --quiet origin "$SLIPWAY_COMMIT" 2>"$private/fetch.log"; then
  :
else
  rc=$?
  sed -e 's#\([A-Za-z+]*://\)[^/@ ]*@#\1#g' "$private/fetch.log" >&2
  log="$private/fetch.log"
  if grep -Eqi 'host key verification failed' "$log"; then
    die 10 "the SSH host key of $shown does not match the known hosts"
  elif grep -Eqi -e 'not our ref|no such remote ref|unadvertised object|find remote ref' \
    -e 'not a valid object|did not send all necessary objects' "$log"; then
    die 11 "commit $short not found on branch $SLIPWAY_BRANCH"
  elif grep -Eqi -e 'repository.*not found|not found.*repositor|no such repository|not exported' \
    -e 'authentication failed|could not read (username|password)|terminal prompts disabled' \
    -e 'permission denied|access denied|does not appear to be a git repository' \
    -e 'returned error: 40[134]|invalid username or password|invalid credentials' "$log"; then
    die 10 "repository $shown not found or access denied"
  elif grep -Eqi -e 'could not resolve|connection refused|timed out|network is unreachable' \
    -e 'no route to host|failed to connect|unable to connect|connection reset|early eof' \
    -e 'returned error: 5[0-9][0-9]|unable to access' "$log"; then
    die 75 "repository $shown unreachable"
  fi
  die "$rc" "git fetch exited $rc"
fi
git -c advice.detachedHead=false checkout -q FETCH_HEAD
head=$(git rev-parse HEAD)
[ "$head" = "$SLIPWAY_COMMIT" ] || die 1 "fetched $head instead of $SLIPWAY_COMMIT"
git log -1 --format='Checked out %h: %s (%an)'
# The build needs the files, not the history or the remote configuration.
rm -rf .git
"""

PLAN_SCRIPT = r"""set -eu
railpack=$(command -v railpack 2>/dev/null || echo /railpack)
mkdir -p "$SLIPWAY_PLAN_DIR"
# Build-time values arrive under a prefix so a user's name never shadows PATH or HOME;
# Railpack's `--env NAME` takes the value of NAME from its own environment.
for name in $SLIPWAY_BUILD_ENV_NAMES; do
  value=$(printenv "SLIPWAY_SECRET_$name" || true)
  export "$name=$value"
done
set -- prepare "$SLIPWAY_SOURCE_DIR" \
  --plan-out "$SLIPWAY_PLAN_DIR/railpack-plan.json" \
  --info-out "$SLIPWAY_PLAN_DIR/railpack-info.json"
if [ "${SLIPWAY_ERROR_MISSING_START:-0}" = 1 ]; then
  set -- "$@" --error-missing-start
fi
for name in $SLIPWAY_BUILD_ENV_NAMES; do
  set -- "$@" --env "$name"
done
out="$SLIPWAY_PLAN_DIR/prepare.log"
{
  rc=0
  "$railpack" "$@" 2>&1 || rc=$?
  echo "$rc" >"$out.rc"
} | tee "$out"
rc=$(cat "$out.rc")
if [ "$rc" -ne 0 ]; then
  if grep -Eqi -e 'i/o timeout|tls handshake timeout|connection (refused|reset)|temporary failure' \
    -e 'no such host|too many requests|rate limit|status( code)?:? 5[0-9][0-9]' "$out"; then
    echo "plan failed: a temporary network error stopped Railpack" >&2
    exit 75
  fi
  exit 1
fi
"""

BUILD_SCRIPT = r"""set -eu
rm -f "$SLIPWAY_METADATA_FILE"
if [ -n "${SLIPWAY_INSECURE_REGISTRY:-}" ]; then
  # Plain HTTP for pushes, cache export and cache import alike.
  printf '[registry."%s"]\n  http = true\n  insecure = true\n' "$SLIPWAY_INSECURE_REGISTRY" \
    >"$SLIPWAY_WORKSPACE/buildkitd.toml"
  BUILDKITD_FLAGS="${BUILDKITD_FLAGS:-} --config=$SLIPWAY_WORKSPACE/buildkitd.toml"
  export BUILDKITD_FLAGS
fi
if [ -n "${SLIPWAY_DOCKERFILE:-}" ] && [ ! -f "$SLIPWAY_SOURCE_DIR/$SLIPWAY_DOCKERFILE" ]; then
  echo "build failed: no Dockerfile at $SLIPWAY_DOCKERFILE in the repository" >&2
  exit 66
fi
if [ -n "$SLIPWAY_BUILD_ENV_NAMES" ]; then
  # BuildKit leaves secret values out of cache keys; the Railpack frontend mixes this hash
  # in so a changed value rebuilds the steps that use it.
  hash=$(for name in $SLIPWAY_BUILD_ENV_NAMES; do
    printf '%s=' "$name"
    printenv "SLIPWAY_SECRET_$name" || true
  done | sha256sum | cut -d ' ' -f 1)
  if [ -z "${SLIPWAY_DOCKERFILE:-}" ]; then
    set -- "$@" --opt "build-arg:secrets-hash=$hash"
  fi
  for name in $SLIPWAY_BUILD_ENV_NAMES; do
    set -- "$@" --secret "id=$name,env=SLIPWAY_SECRET_$name"
  done
fi
buildctl-daemonless.sh "$@"
# `buildctl --metadata-file` writes one JSON object (github.com/moby/buildkit,
# docs "Metadata"), for example:
#   {"containerimage.config.digest": "sha256:2937…",
#    "containerimage.descriptor": {"digest": "sha256:19ff…", "mediaType": "…", "size": 506},
#    "containerimage.digest": "sha256:19ff…", "image.name": "registry/app:sha"}
# The top-level "containerimage.digest" is the pushed manifest. The image has no jq, so
# squeeze the whitespace out and cut the value with grep.
digest=$(tr -d ' \t\r\n' <"$SLIPWAY_METADATA_FILE" |
  grep -o '"containerimage.digest":"sha256:[0-9a-f]\{64\}"' | head -n 1 | cut -d '"' -f 4)
if [ -z "$digest" ]; then
  echo "push failed: BuildKit reported no image digest" >&2
  exit 70
fi
printf '{"image": "%s@%s", "digest": "%s"}' "$SLIPWAY_IMAGE_REPOSITORY" "$digest" "$digest" \
  >"$SLIPWAY_TERMINATION_LOG"
echo "Pushed $SLIPWAY_IMAGE_REPOSITORY@$digest"
"""


def _env(name: str, value: str) -> dict[str, str]:
    return {"name": name, "value": value}


def _common_env(spec: BuildSpec) -> list[dict]:
    # The local cluster recognises a build by these two, so every container carries them.
    return [
        _env("SLIPWAY_REPO_URL", spec.repo_url),
        _env("SLIPWAY_COMMIT", spec.commit_sha),
        _env("SLIPWAY_BRANCH", spec.branch),
        _env("SLIPWAY_APP", spec.app),
        _env("SLIPWAY_DEPLOYMENT", str(spec.deployment_number)),
        _env("SLIPWAY_WORKSPACE", WORKSPACE),
        _env("SLIPWAY_SOURCE_DIR", SOURCE_DIR),
    ]


def _secret_env(spec: BuildSpec) -> list[dict[str, Any]]:
    return [
        {
            "name": f"{SECRET_ENV_PREFIX}{name}",
            "valueFrom": {"secretKeyRef": {"name": spec.build_env_secret, "key": name, "optional": False}},
        }
        for name in spec.build_env_names
    ]


def _resources(cpu_request: str, memory_request: str, cpu_limit: str, memory_limit: str) -> dict:
    return {
        "requests": {"cpu": cpu_request, "memory": memory_request},
        "limits": {"cpu": cpu_limit, "memory": memory_limit},
    }


def _locked_down() -> dict:
    # Clone and plan only read files and talk to the network: nothing else is needed.
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": BUILD_UID,
        "runAsGroup": BUILD_UID,
        "capabilities": {"drop": ["ALL"]},
    }


def _clone_container(spec: BuildSpec, settings: BuildSettings) -> dict:
    env = [
        *_common_env(spec),
        _env("SLIPWAY_SCRATCH", SCRATCH),
        _env("HOME", SCRATCH),
        _env("GIT_TERMINAL_PROMPT", "0"),
        _env("GIT_CONFIG_NOSYSTEM", "1"),
        _env("SLIPWAY_GIT_AUTH", spec.git_credentials_kind or "none"),
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "workspace", "mountPath": WORKSPACE},
        {"name": "scratch", "mountPath": SCRATCH},
    ]
    if spec.git_credentials_secret:
        env.append(_env("SLIPWAY_GIT_CREDENTIALS", GIT_CREDENTIALS_DIR))
        mounts.append({"name": "git-credentials", "mountPath": GIT_CREDENTIALS_DIR, "readOnly": True})
    return {
        "name": CLONE,
        "image": settings.git_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", CLONE_SCRIPT],
        "env": env,
        "volumeMounts": mounts,
        "resources": _resources(settings.clone_cpu, settings.clone_memory, settings.clone_cpu, settings.clone_memory),
        "securityContext": _locked_down(),
        # Kubernetes copies the log tail into the termination message when a step fails.
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def _plan_container(spec: BuildSpec, settings: BuildSettings) -> dict:
    env = [
        *_common_env(spec),
        _env("SLIPWAY_PLAN_DIR", PLAN_DIR),
        _env("SLIPWAY_BUILD_ENV_NAMES", " ".join(spec.build_env_names)),
        _env("SLIPWAY_ERROR_MISSING_START", "1" if settings.error_missing_start else "0"),
        _env("HOME", PLAN_TMP),
        _env("TMPDIR", PLAN_TMP),
        # Railpack prints with colours on a terminal; logs are not one.
        _env("NO_COLOR", "1"),
        *_secret_env(spec),
    ]
    return {
        "name": PLAN,
        "image": settings.railpack_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", PLAN_SCRIPT],
        "env": env,
        "volumeMounts": [
            {"name": "workspace", "mountPath": WORKSPACE},
            {"name": "scratch", "mountPath": PLAN_TMP},
        ],
        "resources": _resources(settings.plan_cpu, settings.plan_memory, settings.plan_cpu, settings.plan_memory),
        "securityContext": _locked_down(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def _buildctl_args(spec: BuildSpec, settings: BuildSettings) -> list[str]:
    if spec.builder == "dockerfile":
        directory, _, filename = spec.dockerfile_path.rpartition("/")
        frontend = [
            "--frontend=dockerfile.v0",
            f"--local=context={SOURCE_DIR}",
            f"--local=dockerfile={SOURCE_DIR}/{directory}".rstrip("/"),
            f"--opt=filename={filename}",
        ]
    else:
        frontend = [
            "--frontend=gateway.v0",
            f"--opt=source={settings.railpack_image}",
            f"--local=context={SOURCE_DIR}",
            f"--local=dockerfile={PLAN_DIR}",
            # Railpack prefixes mount-cache ids with this, keeping apps' caches apart.
            f"--opt=build-arg:cache-key={spec.app}",
        ]
    cache = cache_ref(spec, settings)
    return [
        "build",
        "--progress=plain",
        *frontend,
        f"--output=type=image,name={spec.image},push=true",
        # A cold or broken cache must never fail a build: import of a missing ref only
        # warns, and export is told to ignore errors.
        f"--import-cache=type=registry,ref={cache}",
        f"--export-cache=type=registry,ref={cache},mode=max,ignore-error=true",
        f"--metadata-file={METADATA_FILE}",
    ]


def _build_container(spec: BuildSpec, settings: BuildSettings) -> dict:
    env = [
        *_common_env(spec),
        # Rootless BuildKit inside an unprivileged container cannot create a PID namespace.
        _env("BUILDKITD_FLAGS", "--oci-worker-no-process-sandbox"),
        _env("SLIPWAY_BUILD_ENV_NAMES", " ".join(spec.build_env_names)),
        _env("SLIPWAY_METADATA_FILE", METADATA_FILE),
        _env("SLIPWAY_IMAGE_REPOSITORY", spec.repository),
        _env("SLIPWAY_TERMINATION_LOG", TERMINATION_LOG),
    ]
    if spec.builder == "dockerfile":
        env.append(_env("SLIPWAY_DOCKERFILE", spec.dockerfile_path))
    if spec.registry_insecure:
        env.append(_env("SLIPWAY_INSECURE_REGISTRY", spec.registry))
    mounts: list[dict[str, Any]] = [
        {"name": "workspace", "mountPath": WORKSPACE},
        {"name": "buildkit", "mountPath": BUILDKIT_STATE_DIR},
    ]
    if spec.registry_secret:
        env.append(_env("DOCKER_CONFIG", REGISTRY_CONFIG_DIR))
        mounts.append({"name": "registry-config", "mountPath": REGISTRY_CONFIG_DIR, "readOnly": True})
    env.extend(_secret_env(spec))
    return {
        "name": BUILD,
        "image": settings.buildkit_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", BUILD_SCRIPT, BUILD],
        "args": _buildctl_args(spec, settings),
        "env": env,
        "volumeMounts": mounts,
        "resources": _resources(
            settings.build_cpu_request,
            settings.build_memory_request,
            settings.build_cpu_limit,
            settings.build_memory_limit,
        ),
        "securityContext": {
            "privileged": False,
            "runAsNonRoot": True,
            # The rootless image is built for UID/GID 1000.
            "runAsUser": BUILD_UID,
            "runAsGroup": BUILD_UID,
            # rootlesskit maps the user namespace through the setuid newuidmap/newgidmap,
            # which no_new_privs or a dropped bounding set would break.
            "allowPrivilegeEscalation": True,
            # Creating user and mount namespaces needs syscalls that the default seccomp
            # and AppArmor profiles refuse (BuildKit docs/rootless.md).
            "seccompProfile": {"type": "Unconfined"},
            # AppArmor only as the pod annotation: clusters before 1.30 reject the
            # appArmorProfile field in a server-side apply, and 1.30+ still honour the annotation.
        },
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def _volumes(spec: BuildSpec, settings: BuildSettings) -> list[dict]:
    volumes: list[dict] = [
        {"name": "workspace", "emptyDir": {"sizeLimit": settings.workspace_size_limit}},
        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "buildkit", "emptyDir": {"sizeLimit": settings.workspace_size_limit}},
    ]
    if spec.git_credentials_secret:
        volumes.append(
            {
                "name": "git-credentials",
                # Group-readable: the files belong to root and the fsGroup, the steps run
                # as UID 1000 in that group.
                "secret": {"secretName": spec.git_credentials_secret, "defaultMode": 0o440},
            }
        )
    if spec.registry_secret:
        volumes.append(
            {
                "name": "registry-config",
                "secret": {
                    "secretName": spec.registry_secret,
                    "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
                    "defaultMode": 0o440,
                },
            }
        )
    return volumes


def render_build_job(spec: BuildSpec, settings: BuildSettings) -> list[dict]:
    """Render the objects to create for a build, in creation order (today: the Job)."""
    labels = {
        **spec.labels,
        **base_labels(app=spec.app, deployment=spec.deployment_number, component=COMPONENT_BUILD),
    }
    init_containers = [_clone_container(spec, settings)]
    if spec.builder == "railpack":
        init_containers.append(_plan_container(spec, settings))
    name = build_job_name(spec.app, spec.deployment_number)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": spec.namespace,
            "labels": labels,
            "annotations": {"slipway.dev/commit": spec.commit_sha},
        },
        "spec": {
            "backoffLimit": 0,
            "completions": 1,
            "parallelism": 1,
            "activeDeadlineSeconds": settings.active_deadline_seconds,
            "ttlSecondsAfterFinished": settings.ttl_seconds_after_finished,
            "template": {
                "metadata": {
                    "labels": dict(labels),
                    "annotations": {
                        # Clusters before 1.30 only read AppArmor from this annotation, and
                        # before 1.19 seccomp too; newer ones require it to match the fields.
                        f"container.apparmor.security.beta.kubernetes.io/{BUILD}": "unconfined",
                        f"container.seccomp.security.alpha.kubernetes.io/{BUILD}": "unconfined",
                    },
                },
                "spec": {
                    "restartPolicy": "Never",
                    # A build never talks to the Kubernetes API.
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": BUILD_UID,
                        "runAsGroup": BUILD_UID,
                        "fsGroup": BUILD_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "initContainers": init_containers,
                    "containers": [_build_container(spec, settings)],
                    "volumes": _volumes(spec, settings),
                },
            },
        },
    }
    return [job]


def render_build_secrets(
    spec: BuildSpec,
    *,
    git_credentials: Mapping[str, str] | None = None,
    build_env: Mapping[str, str] | None = None,
) -> list[dict]:
    """Render the per-build Secrets SPEC refers to, from the values given.

    `git_credentials` holds `username` and `password` for a token, or `ssh-privatekey`
    and optionally `known_hosts` for a deploy key. Owner references are added after the
    Job exists, with `owner_references`.
    """
    labels = {
        **spec.labels,
        **base_labels(app=spec.app, deployment=spec.deployment_number, component=COMPONENT_BUILD),
    }
    secrets: list[dict] = []
    if spec.git_credentials_secret:
        if git_credentials is None:
            raise ValueError("the spec names a git credentials Secret but no values were given")
        required = "password" if spec.git_credentials_kind == "token" else "ssh-privatekey"
        if not git_credentials.get(required):
            raise ValueError(f"git credentials of kind {spec.git_credentials_kind} need {required}")
        secrets.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": spec.git_credentials_secret,
                    "namespace": spec.namespace,
                    "labels": labels,
                },
                "type": "kubernetes.io/ssh-auth" if spec.git_credentials_kind == "ssh" else "Opaque",
                "stringData": dict(git_credentials),
            }
        )
    if spec.build_env_names:
        values = build_env or {}
        missing = [name for name in spec.build_env_names if name not in values]
        if missing:
            raise ValueError(f"no values for build-time variables {missing}")
        secrets.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": spec.build_env_secret,
                    "namespace": spec.namespace,
                    "labels": labels,
                },
                "type": "Opaque",
                "stringData": {name: values[name] for name in spec.build_env_names},
            }
        )
    return secrets


def owner_references(*, job_name: str, job_uid: str) -> list[dict[str, Any]]:
    """Return the ownerReferences that make an object go away with its build Job."""
    return [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job_name,
            "uid": job_uid,
            "controller": False,
            # Blocking would need `update` on jobs/finalizers for no benefit here.
            "blockOwnerDeletion": False,
        }
    ]


def with_owner(obj: dict, *, job_name: str, job_uid: str) -> dict:
    """Return a copy of OBJ owned by the build Job."""
    metadata = {**obj["metadata"], "ownerReferences": owner_references(job_name=job_name, job_uid=job_uid)}
    return {**obj, "metadata": metadata}


_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def parse_termination_message(text: str) -> BuildResult:
    """Read the build container's termination message into the pushed image and digest."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        raise BuildJobError("the build finished without reporting the pushed image", permanent=True) from None
    if not isinstance(data, dict):
        raise BuildJobError("the build reported something other than an image", permanent=True)
    image, digest = data.get("image"), data.get("digest")
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise BuildJobError(f"the build reported an invalid digest {digest!r}", permanent=True)
    if not isinstance(image, str) or not image.endswith(f"@{digest}"):
        raise BuildJobError(f"the build reported image {image!r} that is not pinned by its digest", permanent=True)
    return BuildResult(image=image, digest=digest)


# ---- failure classification -------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_OWN_LINE = re.compile(r"^(clone|plan|build|push) failed: (.+)$", re.MULTILINE)
_PROCESS_FAILED = re.compile(r'process "(?P<cmd>(?:[^"\\]|\\.)*)" did not complete successfully: exit code: (?P<code>\d+)')
_SHELL_PREFIX = re.compile(r"^(?:/bin/)?(?:ba)?sh(?:\s+-[a-z]+(?:\s+pipefail)?)*\s+-c\s+", re.IGNORECASE)
_BASE_IMAGE = re.compile(r"failed to resolve source metadata for (\S+?):? .*?not found", re.I)
_PUSH_HOST = re.compile(
    r"(?:failed to push|pushing manifest for|push access denied.*?for)\s+([a-z0-9.-]+(?::\d+)?)/",
    re.IGNORECASE,
)
_URL_HOST = re.compile(r"https?://([a-z0-9.-]+(?::\d+)?)/v2/", re.IGNORECASE)
_DIAL_HOST = re.compile(r"dial tcp:? (?:lookup )?([a-z0-9.:-]+?)(?::| on |: )", re.IGNORECASE)

_PUSH_CONTEXT = re.compile(
    r"failed to push|pushing layers|pushing manifest|exporting to image|"
    r"failed commit on ref|push access denied|/v2/.*(?:blobs/uploads|manifests)",
    re.IGNORECASE,
)
_DENIED = re.compile(
    r"401 unauthorized|403 forbidden|insufficient_scope|authorization failed|"
    r"push access denied|denied: |unauthorized: |requested access to the resource is denied",
    re.IGNORECASE,
)
_UNREACHABLE = re.compile(
    r"connection refused|no such host|i/o timeout|network is unreachable|no route to host|"
    r"tls handshake timeout|connection reset by peer|dial tcp",
    re.IGNORECASE,
)
_ROOTLESS = re.compile(
    r"failed to setup uid/gid map|newuidmap|rootlesskit.*(?:error|failed)|"
    r"operation not permitted.*(?:unshare|mount|userns)|user namespaces? .*not (?:enabled|allowed)",
    re.IGNORECASE,
)
_RAILPACK_ERROR = re.compile(r"^\s*✖\s*(.+)$", re.MULTILINE)


def _clean(text: str | None) -> str:
    return _ANSI.sub("", (text or "").replace("\x00", ""))


def _railpack_errors(text: str) -> list[str]:
    errors = [m.group(1).strip() for m in _RAILPACK_ERROR.finditer(text)]
    # The info file (`--info-out`) holds the same messages as JSON logs.
    for match in re.finditer(r"\{.*\}", text, re.DOTALL):
        try:
            info = json.loads(match.group(0))
        except ValueError:
            continue
        for entry in info.get("logs") or [] if isinstance(info, dict) else []:
            if not isinstance(entry, dict):
                continue
            level = entry.get("level", entry.get("Level"))
            msg = entry.get("msg", entry.get("Msg"))
            if level == "error" and isinstance(msg, str):
                errors.append(msg.strip())
    return errors


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _last_error_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        stripped = line.strip()
        lowered = stripped.lower()
        if lowered.startswith(("error:", "fatal:", "error ")) or " error: " in lowered:
            return _first_line(re.sub(r"^(?:#\d+\s+)?(?:error|fatal):\s*", "", stripped, flags=re.I))
    return ""


def _step_command(raw: str) -> str:
    cmd = raw.replace('\\"', '"').strip()
    cmd = _SHELL_PREFIX.sub("", cmd).strip()
    if len(cmd) >= 2 and cmd[0] == cmd[-1] and cmd[0] in "'\"":
        cmd = cmd[1:-1]
    return _first_line(cmd, 120)


def _registry_host(text: str) -> str:
    for pattern in (_PUSH_HOST, _URL_HOST, _DIAL_HOST):
        match = pattern.search(text)
        if match:
            return match.group(1)
    return ""


def _clone_failure(exit_code: int | None, text: str) -> BuildFailure:
    own = _OWN_LINE.findall(text)
    if own:
        message = f"clone failed: {own[-1][1].strip()}"
        return BuildFailure(CLONE, message, transient=exit_code == EXIT_TRANSIENT)
    lowered = text.lower()
    if exit_code == EXIT_COMMIT_NOT_FOUND or re.search(r"not our ref|unadvertised object|find remote ref", lowered):
        return BuildFailure(CLONE, "clone failed: commit not found in the repository")
    if exit_code == EXIT_ACCESS_DENIED or re.search(
        r"repository.*not found|no such repository|authentication failed|could not read username|"
        r"permission denied|access denied|not exported",
        lowered,
    ):
        return BuildFailure(CLONE, "clone failed: repository not found or access denied")
    if exit_code == EXIT_TRANSIENT or re.search(r"could not resolve|connection refused|timed out|unable to access", lowered):
        return BuildFailure(CLONE, "clone failed: repository unreachable", transient=True)
    detail = _last_error_line(text)
    suffix = f": {detail}" if detail else ""
    return BuildFailure(CLONE, f"clone failed: git exited {exit_code}{suffix}")


def _plan_failure(exit_code: int | None, text: str) -> BuildFailure:
    errors = _railpack_errors(text)
    if errors:
        first = errors[0]
        lowered = first.lower()
        if "no start command" in lowered:
            message = "plan failed: Railpack found no start command"
        elif "could not determine how to build" in lowered:
            message = "plan failed: Railpack could not determine how to build the app (no supported language or framework found)"
        else:
            message = f"plan failed: {_first_line(first)}"
        return BuildFailure(PLAN, message, transient=exit_code == EXIT_TRANSIENT)
    if exit_code == EXIT_TRANSIENT:
        return BuildFailure(PLAN, "plan failed: a temporary network error stopped Railpack", transient=True)
    own = _OWN_LINE.findall(text)
    if own:
        return BuildFailure(PLAN, f"plan failed: {own[-1][1].strip()}")
    detail = _last_error_line(text)
    suffix = f": {detail}" if detail else ""
    return BuildFailure(PLAN, f"plan failed: railpack exited {exit_code}{suffix}")


def _build_failure(exit_code: int | None, text: str, registry: str | None) -> BuildFailure:
    own = [(step, detail) for step, detail in _OWN_LINE.findall(text) if step in (BUILD, PUSH)]
    if exit_code in (EXIT_NO_DOCKERFILE, EXIT_NO_DIGEST) and own:
        step, detail = own[-1]
        return BuildFailure(step, f"{step} failed: {detail.strip()}")
    if _ROOTLESS.search(text):
        return BuildFailure(
            BUILD,
            "build failed: rootless BuildKit could not start on this node "
            "(user namespaces, or unconfined seccomp and AppArmor, are not allowed)",
        )
    processes = list(_PROCESS_FAILED.finditer(text))
    if processes:
        process = processes[-1]
        command = _step_command(process.group("cmd"))
        code = int(process.group("code"))
        message = f"build failed: step `{command}` exited {code}"
        if code == 137:
            message += " (killed, most likely out of memory)"
        return BuildFailure(BUILD, message)
    push_lines = "\n".join(line for line in text.splitlines() if _PUSH_CONTEXT.search(line))
    if push_lines:
        host = _registry_host(push_lines) or registry or "the registry"
        if "server gave http response to https client" in push_lines.lower():
            return BuildFailure(PUSH, f"push failed: registry {host} speaks plain HTTP; mark it insecure")
        if _DENIED.search(push_lines):
            return BuildFailure(PUSH, "push failed: registry denied access")
        if _UNREACHABLE.search(push_lines):
            return BuildFailure(PUSH, f"push failed: registry {host} unreachable", transient=True)
        if re.search(r"\b5\d\d\b", push_lines):
            return BuildFailure(PUSH, f"push failed: registry {host} had an error", transient=True)
        detail = _last_error_line(push_lines) or _first_line(push_lines)
        return BuildFailure(PUSH, f"push failed: {detail}")
    base = _BASE_IMAGE.search(text)
    if base:
        return BuildFailure(BUILD, f"build failed: base image {base.group(1)} not found")
    if re.search(r"dockerfile parse error", text, re.I):
        return BuildFailure(BUILD, f"build failed: {_last_error_line(text) or 'Dockerfile parse error'}")
    secret = re.search(r"secret (\S+) (?:not found|is required)", text, re.I)
    if secret:
        name = secret.group(1).strip("\"'")
        return BuildFailure(BUILD, f"build failed: build-time variable {name} has no value")
    if re.search(r"failed to (?:read|parse) railpack plan", text, re.I):
        return BuildFailure(BUILD, "build failed: the Railpack plan is missing or unreadable")
    if own:
        step, detail = own[-1]
        return BuildFailure(step, f"{step} failed: {detail.strip()}")
    if _UNREACHABLE.search(text):
        detail = _last_error_line(text)
        return BuildFailure(BUILD, f"build failed: network error: {detail or 'a download timed out'}", transient=True)
    detail = _last_error_line(text)
    suffix = f": {detail}" if detail else ""
    return BuildFailure(BUILD, f"build failed: BuildKit exited {exit_code}{suffix}")


def diagnose_build_failure(
    step: str,
    exit_code: int | None,
    log_tail: str = "",
    termination_message: str = "",
    *,
    reason: str | None = None,
    job_reason: str | None = None,
    deadline_seconds: int | None = None,
    registry: str | None = None,
) -> BuildFailure:
    """Explain a failed build step from its exit code, log tail and termination message.

    STEP is the container that failed (`clone`, `plan` or `build`); REASON is its
    terminated reason (e.g. `OOMKilled`), JOB_REASON the Job's failed condition reason
    (e.g. `DeadlineExceeded`).
    """
    if job_reason == "DeadlineExceeded":
        seconds = f"{deadline_seconds} s" if deadline_seconds else "its deadline"
        during = f" (during {step})" if step in STEPS else ""
        return BuildFailure(step, f"build timed out after {seconds}{during}")
    text = _clean(f"{termination_message}\n{log_tail}")
    label = step if step in STEPS else BUILD
    if reason == "OOMKilled":
        return BuildFailure(label, f"{label} failed: out of memory (OOMKilled); raise the build memory limit")
    if step == CLONE:
        return _clone_failure(exit_code, text)
    if step == PLAN:
        return _plan_failure(exit_code, text)
    return _build_failure(exit_code, text, registry)


def classify_build_failure(
    step: str,
    exit_code: int | None,
    log_tail: str = "",
    termination_message: str = "",
    *,
    reason: str | None = None,
    job_reason: str | None = None,
    deadline_seconds: int | None = None,
    registry: str | None = None,
) -> str:
    """Return the message a person can act on for a failed build step."""
    return diagnose_build_failure(
        step,
        exit_code,
        log_tail,
        termination_message,
        reason=reason,
        job_reason=job_reason,
        deadline_seconds=deadline_seconds,
        registry=registry,
    ).message
