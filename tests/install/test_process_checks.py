"""What the install relies on from the running code: probe-friendly health endpoints and a migrate step that checks the key."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import SystemCheckError

pytestmark = pytest.mark.django_db


@pytest.fixture
def production_web(settings):
    """The web as installed: HTTPS enforced, Slipway's host name and localhost allowed."""
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["slipway.example.com", "localhost"]
    return settings


def test_a_probe_asking_for_localhost_gets_healthz_over_plain_http(client, production_web):
    response = client.get("/healthz", HTTP_HOST="localhost")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_a_probe_asking_for_localhost_gets_readyz_over_plain_http(client, production_web):
    response = client.get("/readyz", HTTP_HOST="localhost")
    assert response.status_code in (200, 503)
    assert set(response.json()["checks"]) == {"database", "migrations", "broker"}
    assert response.json()["checks"]["migrations"] == "ok"


def test_other_pages_still_redirect_to_https(client, production_web):
    response = client.get("/admin/login/", HTTP_HOST="slipway.example.com")
    assert response.status_code == 301
    assert response["Location"] == "https://slipway.example.com/admin/login/"


def test_a_probe_without_the_host_header_would_be_refused(client, production_web):
    # Why the Kubernetes probes send "Host: localhost": the pod IP is not an allowed host.
    response = client.get("/healthz", HTTP_HOST="10.1.2.3:8000")
    assert response.status_code == 400


def test_migrate_stops_when_the_encryption_key_cannot_read_the_stored_secrets(shop, settings):
    settings.ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    # skip_checks=False: what `manage.py migrate` does on the command line.
    with pytest.raises(SystemCheckError, match="a stored secret cannot be decrypted"):
        call_command("migrate", "--noinput", verbosity=0, skip_checks=False)


def test_migrate_passes_with_the_key_that_encrypted_them(shop, capsys):
    call_command("migrate", "--noinput", verbosity=1, skip_checks=False)
    assert "No migrations to apply." in capsys.readouterr().out
    shop.refresh_from_db()
    assert shop.webhook_secret
