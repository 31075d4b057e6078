"""Back up and restore as docs/install.md says: pg_dump and pg_restore, and the key that reads the secrets.

Runs against PostgreSQL (DATABASE_URL set, as in CI); the embedded SQLite default has no pg_dump.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid

import psycopg
import pytest
from cryptography.fernet import Fernet
from django.db import connection

from tests.install.conftest import ROOT


def _url(name: str) -> str:
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{name}"


@pytest.fixture
def postgres(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: set DATABASE_URL (CI does)")
    for tool in ("pg_dump", "pg_restore"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: apt-get install -y postgresql-client", pytrace=False)
    return connection.settings_dict["NAME"]


@pytest.fixture
def other_database(postgres):
    """An empty database on the same server, dropped afterwards."""
    name = f"slipway_restore_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_url("postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(_url("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _manage(database: str, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIPWAY_ENCRYPTION")}
    env.update(DATABASE_URL=_url(database), SLIPWAY_ENCRYPTION_KEYS=key, DJANGO_SETTINGS_MODULE="config.settings_test")
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{args[0]} failed: {proc.stderr}"
    return proc


def test_a_restored_backup_reads_its_secrets_with_the_key_and_refuses_to_start_without_it(
    shop, postgres, other_database, tmp_path
):
    from django.conf import settings

    key = settings.ENCRYPTION_KEYS[0]
    dump = tmp_path / "slipway.dump"
    _run("pg_dump", "--dbname", _url(postgres), "--format", "custom", "--file", str(dump))
    # The target already runs Slipway (migrated), as on the host being restored.
    assert _manage(other_database, key, "migrate", "--noinput").returncode == 0
    _run("pg_restore", "--dbname", _url(other_database), "--clean", "--if-exists", "--no-owner", str(dump))

    read = _manage(
        other_database,
        key,
        "shell",
        "-c",
        "from apps.deployments.models import App; print(App.objects.get(name='shop').webhook_secret)",
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.strip().splitlines()[-1] == shop.webhook_secret

    wrong = _manage(other_database, Fernet.generate_key().decode(), "migrate", "--noinput")
    assert wrong.returncode != 0
    assert "a stored secret cannot be decrypted" in wrong.stderr
