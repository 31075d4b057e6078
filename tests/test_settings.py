"""Production settings pass Django's deployment checks; settings come from strict helpers."""

import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int

ROOT = Path(__file__).resolve().parent.parent


def test_production_settings_have_no_deployment_warnings(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SLIPWAY_SECRET_KEY": "k" * 20 + "production-secret-key-with-enough-variety-0123456789",
        "SLIPWAY_ENCRYPTION_KEYS": "UpGmAnkNlDMS5a9KfRx5IlCxbrcH6Yg-K9EronejpZk=",
        "SLIPWAY_STATE_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_booleans_and_numbers_are_read_strictly(monkeypatch):
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="FLAG must be true or false, not 'maybe'"):
        env_bool("FLAG", False)
    monkeypatch.setenv("COUNT", "-3")
    with pytest.raises(ImproperlyConfigured, match="COUNT must be at least 1, not -3"):
        env_int("COUNT", 5, minimum=1)
