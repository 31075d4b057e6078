"""Shared helpers for the install tests: the repository's install files, parsed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = ROOT / "platform"
OVERLAYS = ("trial", "production")
SLIPWAY_COMPONENTS = ("web", "worker", "beat", "controller", "migrate")

# `NAME=value` or `# NAME=value`: a documented variable in .env.example.
_ENV_EXAMPLE_LINE = re.compile(r"^#?\s*([A-Z][A-Z0-9_]*)=", re.MULTILINE)
# env_str("NAME", ...), env_bool("NAME", ...), os.environ.get("NAME") and friends.
_ENV_READ = re.compile(r"""(?:env_(?:str|bool|int|list)|os\.environ\.get|os\.getenv)\(\s*["']([A-Z][A-Z0-9_]*)["']""")


def settings_env_vars() -> set[str]:
    """Return every environment variable config/settings.py reads."""
    return set(_ENV_READ.findall((ROOT / "config" / "settings.py").read_text()))


def documented_env_vars() -> set[str]:
    """Return every variable .env.example names, set or commented out."""
    return set(_ENV_EXAMPLE_LINE.findall((ROOT / ".env.example").read_text()))


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail("kubectl is not installed: apt-get install -y kubectl (or Debian's kubernetes-client)", pytrace=False)
    return path


def render(overlay: str) -> list[dict[str, Any]]:
    """Return the objects `kubectl kustomize` renders for an overlay folder."""
    proc = subprocess.run([kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"kubectl kustomize {overlay} failed:\n{proc.stderr}"
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict[str, Any]]]:
    """Each overlay's rendered objects, by overlay name."""
    return {name: render(PLATFORM / "overlays" / name) for name in OVERLAYS}


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}, found {len(matches)}"
    return matches[0]


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    """Return the pod template spec of a workload, or None for other kinds."""
    if obj["kind"] in ("Deployment", "StatefulSet", "Job", "DaemonSet"):
        return obj["spec"]["template"]["spec"]  # type: ignore[no-any-return]
    return None


def workloads(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if pod_spec(o) is not None]


def slipway_workloads(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Return Slipway's own workloads (the ones running the Slipway image) by component."""
    found = {}
    for obj in workloads(objects):
        component = obj["metadata"]["labels"].get("app.kubernetes.io/component")
        if component in SLIPWAY_COMPONENTS:
            found[component] = obj
    return found


def main_container(obj: dict[str, Any]) -> dict[str, Any]:
    containers = pod_spec(obj)["containers"]  # type: ignore[index]
    assert len(containers) == 1, f"{obj['metadata']['name']} should run one container"
    return containers[0]  # type: ignore[no-any-return]


def load_compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())  # type: ignore[no-any-return]
