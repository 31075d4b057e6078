"""Token authentication, the one error shape for 401/403/429, and the token management command."""

from __future__ import annotations

import io

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken, hash_token
from apps.accounts.services import api_token_create, api_token_revoke
from apps.api.throttling import AuthFailureLimiter, client_ip

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_limits():
    cache.clear()
    yield
    cache.clear()


def bearer(raw: str, ip: str = "127.0.0.1") -> APIClient:
    client = APIClient(REMOTE_ADDR=ip)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_a_valid_token_authenticates_and_records_its_use(alice, shop):
    token, raw = api_token_create(user=alice, name="ci")
    assert bearer(raw).get("/api/v1/apps").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_no_credentials_is_401_with_the_error_shape(shop):
    response = APIClient().get("/api/v1/apps/shop")
    assert response.status_code == 401
    assert response.json() == {
        "error": {"code": "not_authenticated", "message": "Authentication credentials were not provided.", "field": None}
    }
    assert response["WWW-Authenticate"] == "Bearer"


def test_a_revoked_token_stops_working_at_once(alice):
    token, raw = api_token_create(user=alice, name="ci")
    api_token_revoke(token=token)
    response = bearer(raw).get("/api/v1/apps")
    assert response.status_code == 401
    assert response.json()["error"] == {
        "code": "authentication_failed",
        "message": "Invalid or revoked API token.",
        "field": None,
    }


def test_a_token_of_an_inactive_user_does_not_work(alice):
    _, raw = api_token_create(user=alice, name="ci")
    alice.is_active = False
    alice.save()
    assert bearer(raw).get("/api/v1/apps").status_code == 401


def test_a_malformed_authorization_header_is_401(alice):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer two words")
    response = client.get("/api/v1/apps")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Malformed Authorization header: use 'Bearer <token>'."


def test_repeated_failures_from_one_address_are_throttled_with_429(alice, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"auth_failure": "3/min"}}
    _, raw = api_token_create(user=alice, name="ci")
    for _ in range(3):
        assert bearer("slp_guess", ip="10.9.9.9").get("/api/v1/apps").status_code == 401
    response = bearer("slp_guess", ip="10.9.9.9").get("/api/v1/apps")
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "throttled" and error["message"].startswith(
        "Too many failed token attempts from this address; try again in"
    )
    assert 1 <= int(response["Retry-After"]) <= 60
    # Even the right token waits, from that address; other addresses are not affected.
    assert bearer(raw, ip="10.9.9.9").get("/api/v1/apps").status_code == 429
    assert bearer(raw, ip="10.8.8.8").get("/api/v1/apps").status_code == 200


def test_the_limiter_counts_failures_per_window():
    now = [1000.0]
    limiter = AuthFailureLimiter("2/min", clock=lambda: now[0])
    assert limiter.retry_after("1.2.3.4") is None
    limiter.record_failure("1.2.3.4")
    limiter.record_failure("1.2.3.4")
    assert limiter.retry_after("1.2.3.4") == pytest.approx(20.0)  # 1000 s is 40 s into its minute
    now[0] = 1021.0
    assert limiter.retry_after("1.2.3.4") is None


def test_the_client_address_trusts_forwarded_for_only_behind_known_proxies():
    meta = {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "6.6.6.6, 203.0.113.7"}
    assert client_ip(meta, num_proxies=0) == "10.0.0.2"
    assert client_ip(meta, num_proxies=1) == "203.0.113.7"
    assert client_ip(meta, num_proxies=2) == "6.6.6.6"


def test_a_session_without_csrf_token_is_403_on_writes(alice, shop):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.get("/api/v1/apps/shop").status_code == 200
    response = client.patch("/api/v1/apps/shop", {"port": 3000}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert "CSRF" in response.json()["error"]["message"]


def test_an_unsupported_method_is_405_with_the_error_shape(api, alice, shop):
    response = api(alice).put("/api/v1/apps/shop", {}, format="json")
    assert response.status_code == 405
    assert response.json()["error"] == {"code": "method_not_allowed", "message": 'Method "PUT" not allowed.', "field": None}


# -- the management command ------------------------------------------------------------------


def test_the_command_prints_a_working_token_once(alice, shop):
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_token", "alice", "ci", stdout=out, stderr=err)
    raw = out.getvalue().strip()
    assert raw.startswith("slp_")
    token = ApiToken.objects.get(user=alice)
    assert (token.name, token.hashed) == ("ci", hash_token(raw))
    assert "shown only now" in err.getvalue()
    assert bearer(raw).get("/api/v1/apps/shop").status_code == 200


def test_the_command_refuses_an_unknown_user():
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        call_command("create_api_token", "nobody", "ci")


def test_the_command_refuses_an_empty_name(alice):
    with pytest.raises(CommandError, match="Give the token a name"):
        call_command("create_api_token", "alice", "  ")
