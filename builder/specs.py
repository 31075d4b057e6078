"""Inputs of rendering: what one build or one deployment needs, and the pinned settings."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

# Every object Slipway creates carries these labels, so the controller can watch by label
# and the cluster module can prune what a deployment no longer needs.
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "slipway"
LABEL_APP = "slipway.dev/app"
LABEL_DEPLOYMENT = "slipway.dev/deployment"
LABEL_COMPONENT = "slipway.dev/component"

COMPONENT_BUILD = "build"
COMPONENT_APP = "app"

ANNOTATION_SETTINGS_HASH = "slipway.dev/settings-hash"
ANNOTATION_REDEPLOYED_AT = "slipway.dev/redeployed-at"
ANNOTATION_COMMIT = "slipway.dev/commit"

Builder = Literal["railpack", "dockerfile"]
CredentialsKind = Literal["token", "ssh"]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_COMMIT_SHA = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64})$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")

# Names a build-time variable may not take: the build containers need them for themselves,
# and a user value would silently break the clone, Railpack or BuildKit.
RESERVED_BUILD_ENV_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "SHELL",
        "PWD",
        "TMPDIR",
        "DOCKER_CONFIG",
        "BUILDKITD_FLAGS",
        "BUILDKIT_HOST",
        "XDG_RUNTIME_DIR",
        "NO_COLOR",
    }
)
_RESERVED_BUILD_ENV_PREFIXES = ("SLIPWAY_", "GIT_", "BUILDKIT", "ROOTLESSKIT")


def selector(*, app: str, deployment: int | None = None, component: str | None = None) -> str:
    """Return a label selector for an app's objects, optionally narrowed."""
    parts = [f"{LABEL_MANAGED_BY}={MANAGED_BY}", f"{LABEL_APP}={app}"]
    if deployment is not None:
        parts.append(f"{LABEL_DEPLOYMENT}={deployment}")
    if component is not None:
        parts.append(f"{LABEL_COMPONENT}={component}")
    return ",".join(parts)


def base_labels(*, app: str, deployment: int, component: str) -> dict[str, str]:
    """Return the labels every object of one deployment carries."""
    return {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_APP: app,
        LABEL_DEPLOYMENT: str(deployment),
        LABEL_COMPONENT: component,
    }


def _check_dns_label(value: str, what: str) -> None:
    if not _DNS_LABEL.match(value):
        raise ValueError(f"{what} {value!r} is not a DNS-1123 label")


def _check_extra_labels(labels: Mapping[str, str]) -> None:
    reserved = {LABEL_MANAGED_BY, LABEL_APP, LABEL_DEPLOYMENT, LABEL_COMPONENT}
    clash = reserved & set(labels)
    if clash:
        raise ValueError(f"labels {sorted(clash)} are set by Slipway itself")


@dataclass(frozen=True)
class BuildSettings:
    """Pinned images, versions and limits for build Jobs (operator settings, never `latest`)."""

    # Railpack publishes its BuildKit frontend as an image that also holds the full CLI
    # (`/railpack`), so one version pins both the plan and the frontend that reads it.
    railpack_version: str = "0.17.1"
    railpack_image_repository: str = "ghcr.io/railwayapp/railpack-frontend"
    buildkit_image: str = "moby/buildkit:v0.25.0-rootless"
    git_image: str = "alpine/git:v2.49.1"
    active_deadline_seconds: int = 1800
    # Long enough for the controller to finish copying logs after a restart or an outage.
    ttl_seconds_after_finished: int = 3600
    workspace_size_limit: str = "10Gi"
    cache_tag: str = "buildcache"
    clone_cpu: str = "250m"
    clone_memory: str = "256Mi"
    plan_cpu: str = "500m"
    plan_memory: str = "512Mi"
    build_cpu_request: str = "500m"
    build_memory_request: str = "1Gi"
    build_cpu_limit: str = "2"
    build_memory_limit: str = "4Gi"
    # Railway enables this too: an app without a start command cannot be deployed, so
    # failing at plan time gives the clearest message.
    error_missing_start: bool = True

    @property
    def railpack_image(self) -> str:
        """Return the frontend image, which is also the CLI image, at the pinned version."""
        return f"{self.railpack_image_repository}:v{self.railpack_version}"

    def __post_init__(self) -> None:
        for image in (self.buildkit_image, self.git_image, self.railpack_image):
            tag = image.rsplit("/", 1)[-1].partition(":")[2]
            if "@sha256:" not in image and (not tag or tag.startswith("latest")):
                raise ValueError(f"image {image!r} must be pinned to a version")
        if self.active_deadline_seconds <= 0 or self.ttl_seconds_after_finished < 0:
            raise ValueError("build deadline and TTL must be positive")


@dataclass(frozen=True)
class BuildSpec:
    """Everything one build Job needs; names of Secrets, never their values."""

    app: str
    deployment_number: int
    namespace: str
    repo_url: str
    commit_sha: str
    branch: str
    registry: str
    image_repository: str = ""
    builder: Builder = "railpack"
    dockerfile_path: str = "Dockerfile"
    git_credentials_secret: str | None = None
    git_credentials_kind: CredentialsKind | None = None
    build_env_names: tuple[str, ...] = ()
    build_env_secret: str | None = None
    registry_secret: str | None = None
    registry_insecure: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_dns_label(self.app, "app name")
        _check_dns_label(self.namespace, "namespace")
        _check_extra_labels(self.labels)
        if self.deployment_number < 1:
            raise ValueError("deployment number starts at 1")
        if not _COMMIT_SHA.match(self.commit_sha):
            raise ValueError(f"commit {self.commit_sha!r} is not a full hexadecimal SHA")
        if self.builder not in ("railpack", "dockerfile"):
            raise ValueError(f"unknown builder {self.builder!r}")
        if self.builder == "dockerfile":
            path = self.dockerfile_path
            if not path or path.startswith("/") or ".." in path.split("/"):
                raise ValueError(f"Dockerfile path {path!r} must stay inside the repository")
        if bool(self.git_credentials_secret) != bool(self.git_credentials_kind):
            raise ValueError("git credentials need both a Secret name and a kind")
        if self.git_credentials_kind not in (None, "token", "ssh"):
            raise ValueError(f"unknown credentials kind {self.git_credentials_kind!r}")
        if self.build_env_names and not self.build_env_secret:
            raise ValueError("build-time variables need the Secret that holds their values")
        for name in self.build_env_names:
            check_build_env_name(name)
        if len(set(self.build_env_names)) != len(self.build_env_names):
            raise ValueError("build-time variable names repeat")
        if not self.registry or "/" in self.registry.strip("/"):
            raise ValueError(f"registry {self.registry!r} must be a host[:port]")

    @property
    def repository(self) -> str:
        """Return REGISTRY/REPOSITORY without a tag."""
        return f"{self.registry}/{self.image_repository or self.app}"

    @property
    def image(self) -> str:
        """Return the tag this build pushes: REGISTRY/APP:SHA."""
        return f"{self.repository}:{self.commit_sha}"

    @property
    def short_sha(self) -> str:
        """Return the seven-character commit abbreviation people recognise."""
        return self.commit_sha[:7]


def check_build_env_name(name: str) -> None:
    """Raise ValueError unless NAME can be passed to a build as a variable."""
    if not _ENV_NAME.match(name):
        raise ValueError(f"build-time variable name {name!r} is not a valid name")
    if name in RESERVED_BUILD_ENV_NAMES or name.startswith(_RESERVED_BUILD_ENV_PREFIXES):
        raise ValueError(f"build-time variable name {name!r} is reserved for the builder")


@dataclass(frozen=True)
class DeploySettings:
    """Operator settings for app manifests."""

    namespace_prefix: str = "slipway-"
    # Browsers resolve *.localhost to loopback, so the embedded default works with no DNS.
    base_domain: str | None = "localhost"
    ingress_class: str | None = None
    tls_secret: str | None = None
    service_port: int = 80
    progress_deadline_seconds: int = 600
    revision_history_limit: int = 5
    termination_grace_period_seconds: int = 30
    readiness_period_seconds: int = 5
    readiness_timeout_seconds: int = 3
    readiness_failure_threshold: int = 3
    liveness_initial_delay_seconds: int = 30
    liveness_period_seconds: int = 10
    liveness_timeout_seconds: int = 5
    liveness_failure_threshold: int = 6
    # Docker's default set minus the rarely needed ones (see docs/build.md, "App pods").
    capabilities_add: tuple[str, ...] = (
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "KILL",
        "NET_BIND_SERVICE",
        "SETGID",
        "SETUID",
    )
    # Pod Security admission level to enforce on app namespaces. Off by default: build Jobs
    # may run in the app's namespace, and rootless BuildKit needs unconfined seccomp and
    # AppArmor, which "baseline" refuses. Enforce it when builds run in their own namespace.
    pod_security_level: str | None = None
    image_pull_secret: str | None = None
    # Keys the settings hash so the annotation cannot be used to guess short env values.
    settings_hash_key: str = field(default="", repr=False)


@dataclass(frozen=True)
class AppSpec:
    """Everything the manifests of one deployment need."""

    app: str
    deployment_number: int
    image: str
    port: int
    replicas: int = 1
    cpu_limit: str = "500m"
    memory_limit: str = "512Mi"
    cpu_request: str = "100m"
    memory_request: str | None = None
    health_check_path: str = "/"
    liveness_probe: bool = False
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    env_secret_name: str | None = None
    namespace: str | None = None
    host: str | None = None
    ingress_class: str | None = None
    tls_secret: str | None = None
    progress_deadline_seconds: int | None = None
    redeployed_at: str | None = None
    commit_sha: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_dns_label(self.app, "app name")
        _check_extra_labels(self.labels)
        if self.namespace is not None:
            _check_dns_label(self.namespace, "namespace")
        if self.deployment_number < 1:
            raise ValueError("deployment number starts at 1")
        if not _DIGEST.search(self.image):
            raise ValueError(f"image {self.image!r} is not pinned by digest")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is out of range")
        if self.replicas < 0:
            raise ValueError("replicas cannot be negative")
        if self.health_check_path and not self.health_check_path.startswith("/"):
            raise ValueError("health check path must start with /")
        for name in self.env:
            if not _ENV_NAME.match(name):
                raise ValueError(f"environment variable name {name!r} is not valid")
