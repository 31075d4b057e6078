"""Secrets are encrypted at rest and never shown in repr, logs or admin; a bad key stops startup."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from apps.core import crypto
from apps.deployments import logs, services
from apps.deployments.models import EnvVar
from tests.factories import DeploymentFactory

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


def raw_column(table: str, column: str, pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {table} WHERE id = %s", [pk])  # noqa: S608 (names are constants)
        return cursor.fetchone()[0]


def test_env_values_are_encrypted_at_rest(shop):
    var = services.env_var_set(app=shop, name="DATABASE_URL", value="postgres://u:hunter22@db/shop", secret=True)
    stored = raw_column("deployments_envvar", "value", var.pk)
    assert "hunter22" not in stored
    assert crypto.decrypt(stored) == "postgres://u:hunter22@db/shop"
    assert EnvVar.objects.get(pk=var.pk).value == "postgres://u:hunter22@db/shop"


def test_webhook_secrets_and_git_credentials_are_encrypted_at_rest(shop):
    shop.git_credentials = "ghp_supersecrettoken"
    shop.save()
    assert "ghp_supersecrettoken" not in raw_column("deployments_app", "git_credentials", shop.pk)
    assert shop.webhook_secret not in raw_column("deployments_app", "webhook_secret", shop.pk)


def test_a_secret_value_never_appears_in_repr(shop):
    var = services.env_var_set(app=shop, name="API_KEY", value="sk_live_abcdef", secret=True)
    assert "sk_live_abcdef" not in repr(var)
    plain = services.env_var_set(app=shop, name="LOG_LEVEL", value="debug")
    assert "debug" in repr(plain)


def test_stored_log_lines_mask_secret_values(shop):
    services.env_var_set(app=shop, name="API_KEY", value="sk_live_abcdef", secret=True)
    deployment = DeploymentFactory(app=shop)
    logs.append(deployment, "build", "curl -H 'Authorization: sk_live_abcdef' https://api\x00 done\n")
    assert deployment.log_lines.get().text == "curl -H 'Authorization: ********' https://api done"


def test_long_lines_are_capped_with_a_note():
    assert logs.scrub("x" * 5000, max_chars=100) == "x" * 100 + " … [line cut at 100 characters]"


def test_the_admin_never_shows_a_secret_value(client, olivia, shop):
    services.env_var_set(app=shop, name="API_KEY", value="sk_live_abcdef", secret=True)
    client.force_login(olivia)
    page = client.get(f"/admin/deployments/app/{shop.pk}/change/")
    assert page.status_code == 200
    assert b"API_KEY" in page.content and b"sk_live_abcdef" not in page.content
    assert shop.webhook_secret.encode() not in page.content


def run_check(**env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": "/usr/bin:/bin",
        "SLIPWAY_SECRET_KEY": "x" * 60,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SLIPWAY_STATE_DIR": "/tmp/slipway-keycheck",
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=60
    )


def test_a_missing_key_stops_startup_with_a_clear_message():
    result = run_check()
    assert result.returncode != 0
    assert "SLIPWAY_ENCRYPTION_KEYS is not set" in result.stderr
    assert "Fernet.generate_key()" in result.stderr


def test_a_malformed_key_stops_startup_with_a_clear_message():
    result = run_check(SLIPWAY_ENCRYPTION_KEYS="not-a-key")
    assert result.returncode != 0
    assert "key 1 is not a valid Fernet key" in result.stderr


def test_a_wrong_key_is_reported_by_the_database_check(shop, settings):
    from apps.core.checks import check_stored_secrets_decrypt

    assert check_stored_secrets_decrypt(None) == []
    settings.ENCRYPTION_KEYS = ["UpGmAnkNlDMS5a9KfRx5IlCxbrcH6Yg-K9EronejpZk=".replace("U", "V", 1)]
    errors = check_stored_secrets_decrypt(None)
    assert [e.id for e in errors] == ["slipway.E001"]
    assert "cannot be decrypted" in errors[0].msg


def test_a_rotated_key_still_reads_old_values(shop, settings):
    old = settings.ENCRYPTION_KEYS[0]
    var = services.env_var_set(app=shop, name="TOKEN", value="t0k3n", secret=True)
    from cryptography.fernet import Fernet

    settings.ENCRYPTION_KEYS = [Fernet.generate_key().decode(), old]
    assert EnvVar.objects.get(pk=var.pk).value == "t0k3n"
