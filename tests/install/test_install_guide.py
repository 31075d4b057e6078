"""docs/install.md: the commands and files it gives work as written."""

from __future__ import annotations

import re
import subprocess

import yaml

from tests.install.conftest import ROOT, documented_env_vars, find, kubectl, main_container, render
from tests.install.test_compose import _compose
from tests.install.test_dockerfile import _header_commands

GUIDE = ROOT / "docs" / "install.md"


def _block(marker: str) -> str:
    """Return the fenced block that follows `<!-- test:MARKER -->` in the guide."""
    match = re.search(rf"<!-- test:{marker} -->\n```\w*\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    assert match, f"docs/install.md has no block marked test:{marker}"
    return match.group(1)


def test_the_key_commands_fill_in_env_so_that_compose_accepts_it(tmp_path):
    (tmp_path / ".env").write_text((ROOT / ".env.example").read_text())
    (tmp_path / "docker-compose.yml").write_text((ROOT / "docker-compose.yml").read_text())
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _block("keys")], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    values = dict(re.findall(r"^([A-Z_]+)=(.*)$", (tmp_path / ".env").read_text(), re.MULTILINE))
    assert len(values["SLIPWAY_SECRET_KEY"]) >= 50
    assert re.fullmatch(r"[0-9a-f]{48}", values["POSTGRES_PASSWORD"])
    from cryptography.fernet import Fernet

    Fernet(values["SLIPWAY_ENCRYPTION_KEYS"].encode())  # raises for a malformed key
    proc = _compose(tmp_path, "config", "--quiet")
    assert proc.returncode == 0, proc.stderr


def test_the_example_overlay_renders_with_the_address_image_class_and_tls_it_sets(tmp_path):
    (tmp_path / "slipway").symlink_to(ROOT)
    (tmp_path / "my-slipway").mkdir()
    (tmp_path / "my-slipway" / "kustomization.yaml").write_text(_block("overlay"))
    objects = render(tmp_path / "my-slipway")
    ingress = find(objects, "Ingress", "slipway")
    assert ingress["spec"]["rules"][0]["host"] == "slipway.example.com"
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [{"hosts": ["slipway.example.com"], "secretName": "slipway-tls"}]
    web = find(objects, "Deployment", "slipway-web")
    assert main_container(web)["image"] == "registry.example.com/slipway:0.1.0"
    assert web["spec"]["replicas"] == 2
    config_map = next(o for o in objects if o["kind"] == "ConfigMap")
    assert config_map["data"]["SLIPWAY_INGRESS_CLASS"] == "nginx"
    assert config_map["data"]["SLIPWAY_LEADER_ELECTION"] == "true", "the merge keeps the overlay's settings"
    assert main_container(web)["envFrom"][0]["configMapRef"]["name"] == config_map["metadata"]["name"]


def test_the_trial_secret_command_creates_every_key_the_trial_reads(tmp_path):
    command = _block("trial-secret").replace("kubectl ", f"{kubectl()} ", 1)
    command = command.replace(
        "create secret generic slipway-secrets", "create secret generic slipway-secrets --dry-run=client -o yaml"
    )
    script = "SECRET_KEY=s ENCRYPTION_KEY=k\n" + command
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    secret = yaml.safe_load(proc.stdout)
    assert set(secret["data"]) == {
        "SLIPWAY_SECRET_KEY",
        "SLIPWAY_ENCRYPTION_KEYS",
        "POSTGRES_PASSWORD",
        "DATABASE_URL",
        "REDIS_URL",
    }
    import base64

    url = base64.b64decode(secret["data"]["DATABASE_URL"]).decode()
    password = base64.b64decode(secret["data"]["POSTGRES_PASSWORD"]).decode()
    assert url == f"postgres://slipway:{password}@slipway-postgres:5432/slipway"
    trial = render(ROOT / "platform" / "overlays" / "trial")
    assert find(trial, "Service", "slipway-postgres")
    assert base64.b64decode(secret["data"]["REDIS_URL"]).decode() == "redis://slipway-redis:6379/0"
    assert find(trial, "Service", "slipway-redis")


def test_every_path_and_setting_the_guide_names_exists():
    text = GUIDE.read_text()
    for path in set(re.findall(r"platform/[\w/.-]+", text)):
        assert (ROOT / path.rstrip(".")).exists(), path
    for name in set(re.findall(r"\b(SLIPWAY_[A-Z_]+)\b", text)):
        assert name in documented_env_vars(), f"{name} is not in .env.example"


def test_the_guide_covers_every_step_a_reader_needs():
    text = GUIDE.read_text()
    for heading in (
        "## Install on one host with docker compose",
        "## Install on a Kubernetes cluster",
        "## Configure",
        "## Upgrade",
        "## Back up and restore",
    ):
        assert heading in text
    for command in (
        "docker compose up -d --build",
        "python manage.py createsuperuser",
        "kubectl apply -k",
        "kubectl -n slipway delete job slipway-migrate",
        "pg_dump",
        "pg_restore",
    ):
        assert command in text, command


def test_the_guides_process_table_gives_the_commands_the_image_documents():
    rows = dict(re.findall(r"^\| (\w+)(?: \(the default\))? \| `([^`]+)` \|$", GUIDE.read_text(), re.MULTILINE))
    assert {name: command.split() for name, command in rows.items()} == _header_commands()
