"""Behaviour rules: what a simulated container does, chosen by image, container, env or namespace.

Rules live in the ConfigMap `behaviours` in namespace `kubesim-system`. Each data key is a rule
name and each value is JSON::

    {"match": {"image": "<glob>", "container": "<glob>", "namespace": "<glob>", "pod": "<glob>",
               "env": {"NAME": "<glob>"}, "labels": {"k": "<glob>"},
               "annotations": {"k": "<glob>"}, "init": true|false},
     "behaviour": {"type": "crash", "after": 2, ...},
     "priority": 0}

The winning rule for a container is the matching one with the highest `priority`, then the most
criteria (each env/label/annotation entry counts as one; `image: "*"` counts as none), then the
one set last (`order`, written by set_behaviour), then the greatest rule name. A pod annotation
`kubesim.slipway.dev/behaviour` (or `kubesim.slipway.dev/behaviour.<container>`) holding a
behaviour JSON (or just a type name) beats every rule. docs/local-cluster.md lists the types.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

NAMESPACE = "kubesim-system"
CONFIGMAP = "behaviours"
ANNOTATION = "kubesim.slipway.dev/behaviour"

# Defaults in nominal seconds; every duration is multiplied by KUBESIM_TIME_SCALE when used.
COMMON_DEFAULTS: dict[str, Any] = {
    "start_delay": 0.5,  # ContainerCreating (pull + create) before the first start
    "restart_delay": 1.0,  # pause before the first, immediate restart (the kubelet's next sync)
    "ready_after": None,  # None: the readinessProbe's initialDelaySeconds, or 0 without a probe
    "log_lines": None,  # None: one "started" line
    "log_every": 0.0,  # seconds between periodic lines; 0 means none
    "log_line": "{container}: tick {n}",
    "backoff": 10.0,  # first back-off before a restart (CrashLoopBackOff) or an image pull
    "max_backoff": 300.0,  # the back-off doubles up to this
}
DEFAULTS: dict[str, dict[str, Any]] = {
    "healthy": {},
    "never_ready": {},
    "slow_start": {"ready_after": 30.0},
    "crash": {"after": 2.0, "exit_code": 1, "reason": "Error", "backoff": 10.0, "max_backoff": 300.0},
    "oom": {"after": 2.0, "exit_code": 137, "reason": "OOMKilled", "backoff": 10.0, "max_backoff": 300.0},
    "flap": {
        "healthy_for": 30.0,
        "crash_for": 60.0,
        "after": 2.0,
        "exit_code": 1,
        "reason": "Error",
        "backoff": 10.0,
        "max_backoff": 300.0,
    },
    "exit": {"duration": 1.0, "exit_code": 0, "message": ""},
    "pull_error": {"err_for": 2.0, "backoff": 10.0, "max_backoff": 300.0, "message": None},
    "invalid_image": {"message": None},
    "config_error": {"message": None, "retry": 10.0},
    "create_error": {"message": None, "retry": 10.0},
    "run_error": {"message": None, "backoff": 10.0, "max_backoff": 300.0},
    "host_run": {"script": None, "timeout": None, "message": ""},
}
TYPES = tuple(DEFAULTS)


class BehaviourError(ValueError):
    """Raised for a rule or behaviour that cannot be used."""


def time_scale() -> float:
    """Return the global time scale from KUBESIM_TIME_SCALE (default 1.0)."""
    try:
        scale = float(os.environ.get("KUBESIM_TIME_SCALE", "1") or 1)
    except ValueError:
        return 1.0
    return scale if scale > 0 else 1.0


@dataclass(frozen=True)
class Behaviour:
    """One resolved behaviour: its type and every parameter with defaults filled in."""

    type: str
    params: dict[str, Any] = field(default_factory=dict)
    rule: str = ""

    def __getitem__(self, key: str) -> Any:
        return self.params[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.params.get(key, default)

    def key(self) -> str:
        """Return a stable identity, to notice when a container's behaviour changed."""
        return json.dumps([self.type, self.params], sort_keys=True, default=str)


def make_behaviour(spec: dict[str, Any] | str, rule: str = "") -> Behaviour:
    """Validate a behaviour spec and fill in its defaults."""
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, dict):
        raise BehaviourError(f"behaviour must be an object, not {type(spec).__name__}")
    btype = spec.get("type")
    if btype not in DEFAULTS:
        raise BehaviourError(f"unknown behaviour type {btype!r}; known: {', '.join(TYPES)}")
    params = {**COMMON_DEFAULTS, **DEFAULTS[btype]}
    unknown = set(spec) - set(params) - {"type"}
    if unknown:
        raise BehaviourError(f"unknown fields for {btype}: {', '.join(sorted(unknown))}")
    params.update({k: v for k, v in spec.items() if k != "type"})
    if params["log_lines"] is not None and not isinstance(params["log_lines"], list):
        raise BehaviourError("log_lines must be a list of strings")
    return Behaviour(btype, params, rule)


@dataclass(frozen=True)
class Rule:
    """A named rule from the ConfigMap."""

    name: str
    match: dict[str, Any]
    behaviour: Behaviour
    priority: int = 0
    order: float = 0.0

    def specificity(self) -> int:
        m = self.match
        score = sum(1 for k in ("container", "namespace", "pod") if m.get(k) not in (None, "*"))
        score += 1 if m.get("image") not in (None, "*") else 0
        score += 1 if "init" in m else 0
        for k in ("env", "labels", "annotations"):
            score += len(m.get(k) or {})
        return score

    def rank(self) -> tuple[int, int, float, str]:
        return (self.priority, self.specificity(), self.order, self.name)


MATCH_KEYS = {"image", "container", "namespace", "pod", "env", "labels", "annotations", "init"}


def parse_rule(name: str, value: str | dict[str, Any]) -> Rule:
    """Parse one ConfigMap entry into a Rule."""
    data = json.loads(value) if isinstance(value, str) else value
    if not isinstance(data, dict):
        raise BehaviourError(f"rule {name}: value must be a JSON object")
    match = data.get("match") or {}
    unknown = set(match) - MATCH_KEYS
    if unknown:
        raise BehaviourError(f"rule {name}: unknown match keys {', '.join(sorted(unknown))}")
    for k in ("env", "labels", "annotations"):
        if k in match and not isinstance(match[k], dict):
            raise BehaviourError(f"rule {name}: match.{k} must be an object")
    if "behaviour" not in data:
        raise BehaviourError(f"rule {name}: missing 'behaviour'")
    return Rule(
        name, match, make_behaviour(data["behaviour"], rule=name), int(data.get("priority", 0)), float(data.get("order", 0.0))
    )


def parse_rules(data: dict[str, str] | None) -> tuple[list[Rule], dict[str, str]]:
    """Parse the ConfigMap data; return the good rules and an error per bad rule."""
    rules, errors = [], {}
    for name, value in sorted((data or {}).items()):
        try:
            rules.append(parse_rule(name, value))
        except (ValueError, TypeError) as exc:
            errors[name] = str(exc)
    return rules, errors


def _glob(pattern: str | None, value: str | None) -> bool:
    if pattern is None:
        return True
    return value is not None and fnmatch.fnmatchcase(value, str(pattern))


def pod_env(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """Return literal env values of every container in the pod, this container's winning."""
    env: dict[str, str] = {}
    spec = pod.get("spec", {})
    others = [c for c in spec.get("initContainers", []) + spec.get("containers", []) if c is not container]
    for c in [*others, container]:
        for item in c.get("env") or []:
            if "value" in item:
                env[item["name"]] = item.get("value") or ""
    return env


def matches(rule: Rule, pod: dict[str, Any], container: dict[str, Any], init: bool) -> bool:
    """Return True when the rule applies to this container of this pod."""
    m = rule.match
    meta = pod.get("metadata", {})
    if "init" in m and bool(m["init"]) != init:
        return False
    if not (
        _glob(m.get("image"), container.get("image"))
        and _glob(m.get("container"), container.get("name"))
        and _glob(m.get("namespace"), meta.get("namespace"))
        and _glob(m.get("pod"), meta.get("name"))
    ):
        return False
    env = pod_env(pod, container) if m.get("env") else {}
    for key, pattern in (m.get("env") or {}).items():
        if not _glob(pattern, env.get(key)):
            return False
    for src in ("labels", "annotations"):
        values = meta.get(src) or {}
        for key, pattern in (m.get(src) or {}).items():
            if not _glob(pattern, values.get(key)):
                return False
    return True


def default_behaviour(pod: dict[str, Any], init: bool) -> Behaviour:
    """Return what a container does when no rule matches."""
    policy = pod.get("spec", {}).get("restartPolicy", "Always")
    # Init containers and Job containers must end, or pods never initialise or complete.
    if init or policy != "Always":
        return make_behaviour({"type": "exit"}, rule="(default)")
    return make_behaviour({"type": "healthy"}, rule="(default)")


def resolve(rules: list[Rule], pod: dict[str, Any], container: dict[str, Any], init: bool) -> Behaviour:
    """Pick the behaviour for one container: annotation, then the best rule, then the default."""
    annotations = pod.get("metadata", {}).get("annotations") or {}
    for key in (f"{ANNOTATION}.{container.get('name')}", ANNOTATION):
        if key in annotations:
            raw = annotations[key].strip()
            try:
                spec = json.loads(raw) if raw.startswith("{") else raw
                return make_behaviour(spec, rule=f"annotation {key}")
            except (ValueError, TypeError):
                break  # A broken annotation falls back to the rules, as a typo should not crash.
    best = None
    for rule in rules:
        if matches(rule, pod, container, init) and (best is None or rule.rank() > best.rank()):
            best = rule
    return best.behaviour if best else default_behaviour(pod, init)


def fake_digest(image: str, env: dict[str, str]) -> str:
    """Return the deterministic fake image digest `{digest}` stands for in an exit message."""
    payload = json.dumps({"image": image, "env": dict(sorted(env.items()))}, sort_keys=True)
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()


# ----- helpers for tests and scripts, on a kubernetes.client.ApiClient ---------------------------
def _core(api_client: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(api_client)


def _ensure_configmap(core: Any, timeout: float) -> None:
    from kubernetes.client.rest import ApiException

    try:
        core.read_namespaced_config_map(CONFIGMAP, NAMESPACE, _request_timeout=timeout)
        return
    except ApiException as exc:
        if exc.status != 404:
            raise
    try:
        core.create_namespace({"metadata": {"name": NAMESPACE}}, _request_timeout=timeout)
    except ApiException as exc:
        if exc.status != 409:
            raise
    try:
        core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": CONFIGMAP}, "data": {}}, _request_timeout=timeout)
    except ApiException as exc:
        if exc.status != 409:
            raise


def set_behaviour(
    api_client: Any,
    name: str,
    *,
    match: dict[str, Any] | None = None,
    behaviour: dict[str, Any] | str,
    priority: int = 0,
    timeout: float = 10.0,
    wait: bool = True,
) -> None:
    """Add or replace the rule `name` in the behaviours ConfigMap (and wait until applied)."""
    rule = {"match": match or {}, "behaviour": behaviour, "priority": priority, "order": time.time()}
    parse_rule(name, rule)  # Fail here, in the caller, rather than as a kubelet log line.
    core = _core(api_client)
    _ensure_configmap(core, timeout)
    cm = core.patch_namespaced_config_map(
        CONFIGMAP, NAMESPACE, {"data": {name: json.dumps(rule, sort_keys=True)}}, _request_timeout=timeout
    )
    if wait:
        wait_applied(api_client, cm.metadata.resource_version, timeout=timeout)


def wait_applied(api_client: Any, resource_version: str, *, timeout: float = 10.0) -> None:
    """Wait until every simulated kubelet has applied the ConfigMap at resource_version."""
    from kubernetes.client.rest import ApiException

    core = _core(api_client)
    nodes = core.list_node(label_selector="kubesim.slipway.dev/simulated=true", _request_timeout=timeout).items
    # One kubelet process serves every node of an instance; ask each distinct port once.
    ports: dict[int, str] = {}
    for node in nodes:
        ports.setdefault(node.status.daemon_endpoints.kubelet_endpoint.port, node.metadata.name)
    deadline = time.monotonic() + timeout
    for node_name in ports.values():
        while True:
            try:
                raw = core.connect_get_node_proxy_with_path(node_name, "kubesim/rules", _request_timeout=timeout)
                seen = json.loads(raw if isinstance(raw, str) else raw.decode())
                if int(seen["resourceVersion"]) >= int(resource_version):
                    break
            except (ApiException, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"kubelet on {node_name} did not apply behaviours {resource_version} within {timeout}s")
            time.sleep(0.02)


def clear_behaviours(api_client: Any, names: list[str] | None = None, *, timeout: float = 10.0, wait: bool = True) -> None:
    """Remove the named rules, or every rule when names is None."""
    from kubernetes.client.rest import ApiException

    core = _core(api_client)
    try:
        cm = core.read_namespaced_config_map(CONFIGMAP, NAMESPACE, _request_timeout=timeout)
    except ApiException as exc:
        if exc.status == 404:
            return
        raise
    existing = cm.data or {}
    drop = list(existing) if names is None else [n for n in names if n in existing]
    if drop:
        # A JSON merge patch with null values removes the keys.
        cm = core.patch_namespaced_config_map(CONFIGMAP, NAMESPACE, {"data": dict.fromkeys(drop)}, _request_timeout=timeout)
        if wait:
            wait_applied(api_client, cm.metadata.resource_version, timeout=timeout)
