"""Render the Kubernetes objects that run one deployment of an app.

Choices for user images, which Slipway does not control (docs/build.md explains each):

- `runAsNonRoot` is not forced: many public images start as root and drop privileges.
- `allowPrivilegeEscalation: false`: no setuid binary may gain more than the process had.
- Capabilities: drop ALL, add back the few a root-started web server needs to drop
  privileges, own its files and bind ports below 1024 (see `DeploySettings`).
- `seccompProfile: RuntimeDefault`, and no service account token: apps never call the API.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from builder.specs import (
    ANNOTATION_COMMIT,
    ANNOTATION_REDEPLOYED_AT,
    ANNOTATION_SETTINGS_HASH,
    COMPONENT_APP,
    LABEL_APP,
    AppSpec,
    DeploySettings,
    base_labels,
)

CONTAINER_NAME = "app"
PORT_NAME = "http"


def namespace_name(spec: AppSpec, settings: DeploySettings) -> str:
    """Return the app's namespace: the spec's, or the configured prefix plus the app name."""
    name = spec.namespace or f"{settings.namespace_prefix}{spec.app}"
    if len(name) > 63:
        raise ValueError(f"namespace {name!r} is longer than 63 characters")
    return name


def env_secret_name(spec: AppSpec) -> str:
    """Return the name of the Secret holding the app's environment."""
    return spec.env_secret_name or f"{spec.app}-env"


def app_host(spec: AppSpec, settings: DeploySettings) -> str | None:
    """Return the host the Ingress serves: a custom domain, else APP.BASE_DOMAIN."""
    if spec.host:
        return spec.host
    if settings.base_domain:
        return f"{spec.app}.{settings.base_domain}"
    return None


def settings_hash(spec: AppSpec, settings: DeploySettings) -> str:
    """Return a hash of everything that should roll the pods when it changes.

    Changing the env Secret alone does not restart pods, so the pod template carries this
    hash: a Redeploy after an env change alters the template and starts a rollout.
    """
    material = {
        "env": sorted(spec.env.items()),
        "image": spec.image,
        "port": spec.port,
        "resources": [spec.cpu_request, spec.cpu_limit, _memory_request(spec), spec.memory_limit],
        "health": [spec.health_check_path, spec.liveness_probe],
    }
    data = json.dumps(material, sort_keys=True, separators=(",", ":")).encode()
    # Keyed when the operator provides a key, so the hash cannot confirm guesses of short values.
    key = settings.settings_hash_key.encode()
    digest = hmac.new(key, data, hashlib.sha256).hexdigest() if key else hashlib.sha256(data).hexdigest()
    return digest[:32]


def _memory_request(spec: AppSpec) -> str:
    # Memory is not compressible: a request below the limit only invites eviction.
    return spec.memory_request or spec.memory_limit


def _labels(spec: AppSpec) -> dict[str, str]:
    return {**spec.labels, **base_labels(app=spec.app, deployment=spec.deployment_number, component=COMPONENT_APP)}


def _metadata(spec: AppSpec, name: str, namespace: str | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": _labels(spec)}
    if namespace is not None:
        metadata["namespace"] = namespace
    return metadata


def _probe(spec: AppSpec, *, period: int, timeout: int, failures: int, delay: int = 0) -> dict[str, Any]:
    # An empty path means the app speaks something other than HTTP: check the port opens.
    handler: dict[str, Any] = (
        {"httpGet": {"path": spec.health_check_path, "port": PORT_NAME}}
        if spec.health_check_path
        else {"tcpSocket": {"port": PORT_NAME}}
    )
    probe = {
        **handler,
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
        "successThreshold": 1,
    }
    if delay:
        probe["initialDelaySeconds"] = delay
    return probe


def _container(spec: AppSpec, settings: DeploySettings) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": spec.image,
        # Pinned by digest, so the node's copy is always the right one.
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": PORT_NAME, "containerPort": spec.port, "protocol": "TCP"}],
        "envFrom": [{"secretRef": {"name": env_secret_name(spec)}}],
        "readinessProbe": _probe(
            spec,
            period=settings.readiness_period_seconds,
            timeout=settings.readiness_timeout_seconds,
            failures=settings.readiness_failure_threshold,
        ),
        "resources": {
            "requests": {"cpu": spec.cpu_request, "memory": _memory_request(spec)},
            "limits": {"cpu": spec.cpu_limit, "memory": spec.memory_limit},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "capabilities": {"drop": ["ALL"], "add": list(settings.capabilities_add)},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    # Most buildpack-style apps listen on $PORT; an explicit entry would override the user's.
    if "PORT" not in spec.env:
        container["env"] = [{"name": "PORT", "value": str(spec.port)}]
    if spec.liveness_probe:
        container["livenessProbe"] = _probe(
            spec,
            period=settings.liveness_period_seconds,
            timeout=settings.liveness_timeout_seconds,
            failures=settings.liveness_failure_threshold,
            delay=settings.liveness_initial_delay_seconds,
        )
    return container


def render_namespace(spec: AppSpec, settings: DeploySettings) -> dict[str, Any]:
    """Render the app's namespace, enforcing Pod Security admission when a level is configured."""
    labels = _labels(spec)
    if settings.pod_security_level:
        labels["pod-security.kubernetes.io/enforce"] = settings.pod_security_level
        labels["pod-security.kubernetes.io/warn"] = "restricted"
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace_name(spec, settings), "labels": labels},
    }


def render_env_secret(spec: AppSpec, settings: DeploySettings) -> dict[str, Any]:
    """Render the Secret holding the app's environment variables."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(spec, env_secret_name(spec), namespace_name(spec, settings)),
        "type": "Opaque",
        "stringData": dict(sorted(spec.env.items())),
    }


def render_deployment(spec: AppSpec, settings: DeploySettings) -> dict[str, Any]:
    """Render the Deployment: digest-pinned image, probes, and a rollout that never drops capacity."""
    annotations = {ANNOTATION_SETTINGS_HASH: settings_hash(spec, settings)}
    if spec.redeployed_at:
        annotations[ANNOTATION_REDEPLOYED_AT] = spec.redeployed_at
    if spec.commit_sha:
        annotations[ANNOTATION_COMMIT] = spec.commit_sha
    pod_spec: dict[str, Any] = {
        "containers": [_container(spec, settings)],
        "automountServiceAccountToken": False,
        # Service links would inject one variable per Service in the namespace into the app.
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": settings.termination_grace_period_seconds,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    }
    if settings.image_pull_secret:
        pod_spec["imagePullSecrets"] = [{"name": settings.image_pull_secret}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(spec, spec.app, namespace_name(spec, settings)),
        "spec": {
            "replicas": spec.replicas,
            # The selector is immutable, so it names the app only, never the deployment.
            "selector": {"matchLabels": {LABEL_APP: spec.app}},
            "strategy": {
                "type": "RollingUpdate",
                # Keep every ready pod until its replacement is ready: capacity never drops.
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
            },
            "progressDeadlineSeconds": spec.progress_deadline_seconds or settings.progress_deadline_seconds,
            "revisionHistoryLimit": settings.revision_history_limit,
            "template": {
                "metadata": {"labels": _labels(spec), "annotations": annotations},
                "spec": pod_spec,
            },
        },
    }


def render_service(spec: AppSpec, settings: DeploySettings) -> dict[str, Any]:
    """Render the ClusterIP Service in front of the app's pods."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec, spec.app, namespace_name(spec, settings)),
        "spec": {
            "type": "ClusterIP",
            "selector": {LABEL_APP: spec.app},
            "ports": [{"name": PORT_NAME, "port": settings.service_port, "targetPort": PORT_NAME, "protocol": "TCP"}],
        },
    }


def render_ingress(spec: AppSpec, settings: DeploySettings) -> dict[str, Any] | None:
    """Render the Ingress for the app's host, or None when no host is configured."""
    host = app_host(spec, settings)
    if host is None:
        return None
    ingress_spec: dict[str, Any] = {
        "rules": [
            {
                "host": host,
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": spec.app, "port": {"name": PORT_NAME}}},
                        }
                    ]
                },
            }
        ]
    }
    ingress_class = spec.ingress_class or settings.ingress_class
    if ingress_class:
        ingress_spec["ingressClassName"] = ingress_class
    tls_secret = spec.tls_secret or settings.tls_secret
    if tls_secret:
        ingress_spec["tls"] = [{"hosts": [host], "secretName": tls_secret}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": _metadata(spec, spec.app, namespace_name(spec, settings)),
        "spec": ingress_spec,
    }


def render_app(spec: AppSpec, settings: DeploySettings) -> list[dict[str, Any]]:
    """Render every object of one deployment, in the order to apply them."""
    objects = [
        render_namespace(spec, settings),
        render_env_secret(spec, settings),
        render_deployment(spec, settings),
        render_service(spec, settings),
    ]
    ingress = render_ingress(spec, settings)
    if ingress is not None:
        objects.append(ingress)
    return objects


EXAMPLE_DIGEST = "sha256:" + hashlib.sha256(b"slipway example image").hexdigest()


def example_spec() -> AppSpec:
    """Return the spec of the example app shown in the docs."""
    return AppSpec(
        app="shop",
        deployment_number=7,
        image=f"registry.example.com/shop@{EXAMPLE_DIGEST}",
        port=8000,
        replicas=2,
        cpu_limit="500m",
        memory_limit="512Mi",
        health_check_path="/healthz",
        liveness_probe=True,
        env={"DATABASE_URL": "postgres://shop:example@db.internal/shop", "LOG_LEVEL": "info"},
        commit_sha="3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39",
        redeployed_at="2026-01-15T09:30:00Z",
    )


def example_settings() -> DeploySettings:
    """Return the settings used for the docs' example."""
    return DeploySettings(base_domain="apps.example.com", ingress_class="nginx", tls_secret="wildcard-apps-example-com")


def render_example() -> list[dict[str, Any]]:
    """Render the example app's manifests for the docs."""
    return render_app(example_spec(), example_settings())
