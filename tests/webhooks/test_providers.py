"""Which provider sent a delivery, its delivery id, and its signature over the exact bytes."""

from __future__ import annotations

import json

import pytest

from apps.webhooks.providers import delivery_id, detect_provider, event_name, verify
from tests.webhooks.conftest import fixture_bytes, hmac_hex, provider_headers

SECRET = "s3cret-for-tests"
BODY = fixture_bytes("github/push")


@pytest.mark.parametrize(
    ("sent_as", "detected"),
    [("github", "github"), ("gitlab", "gitlab"), ("gitea", "gitea"), ("forgejo", "gitea")],
)
def test_the_provider_is_recognised_from_its_headers(sent_as, detected):
    headers = provider_headers(sent_as, BODY, secret=SECRET, event="push")
    assert detect_provider(headers) == detected


def test_gitea_is_recognised_although_it_also_sends_githubs_headers():
    headers = provider_headers("gitea", BODY, secret=SECRET, event="push")
    assert "X-GitHub-Event" in headers and "X-Hub-Signature-256" in headers
    assert detect_provider(headers) == "gitea"


def test_headers_are_matched_whatever_their_case():
    assert detect_provider({"x-github-event": "push"}) == "github"
    assert event_name("github", {"X-GITHUB-EVENT": "ping"}) == "ping"


def test_a_request_from_no_known_provider_is_not_recognised():
    assert detect_provider({"User-Agent": "curl/8.0", "Content-Type": "application/json"}) is None


@pytest.mark.parametrize(
    ("provider", "headers", "expected"),
    [
        ("github", {"X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958"}, "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
        ("gitlab", {"Idempotency-Key": "key-1", "X-Gitlab-Event-UUID": "uuid-1"}, "key-1"),
        ("gitlab", {"X-Gitlab-Event-UUID": "uuid-1"}, "uuid-1"),
        ("gitea", {"X-Gitea-Delivery": "d-1", "X-GitHub-Delivery": "d-1"}, "d-1"),
        ("gitea", {"X-Forgejo-Delivery": "f-1"}, "f-1"),
        ("github", {}, ""),
    ],
)
def test_the_delivery_id_comes_from_the_providers_header(provider, headers, expected):
    assert delivery_id(provider, headers) == expected


@pytest.mark.parametrize("provider", ["github", "gitlab", "gitea", "forgejo"])
def test_a_delivery_signed_with_the_secret_is_valid(provider):
    headers = provider_headers(provider, BODY, secret=SECRET, event="push")
    verdict = verify(detect_provider(headers), headers, BODY, SECRET)
    assert (verdict.signature, verdict.ok) == ("valid", True)


@pytest.mark.parametrize("provider", ["github", "gitlab", "gitea"])
def test_a_delivery_signed_with_another_secret_is_invalid(provider):
    headers = provider_headers(provider, BODY, secret="someone-elses-secret", event="push")
    verdict = verify(provider, headers, BODY, SECRET)
    assert verdict.signature == "invalid"
    assert SECRET not in verdict.message and "someone-elses-secret" not in verdict.message


@pytest.mark.parametrize("provider", ["github", "gitea"])
def test_a_tampered_body_fails_the_signature(provider):
    headers = provider_headers(provider, BODY, secret=SECRET, event="push")
    tampered = BODY.replace(b"Update README", b"Update READMF")
    assert verify(provider, headers, tampered, SECRET).signature == "invalid"


@pytest.mark.parametrize("provider", ["github", "gitea"])
def test_a_signature_over_re_serialised_json_does_not_match_the_bytes_sent(provider):
    # Same data, different bytes: receivers that re-serialise the parsed body before
    # checking accept forgeries and reject real deliveries; we check the bytes sent.
    reserialised = json.dumps(json.loads(BODY), separators=(",", ":")).encode()
    assert json.loads(reserialised) == json.loads(BODY)
    headers = provider_headers(provider, reserialised, secret=SECRET, event="push")
    assert verify(provider, headers, BODY, SECRET).signature == "invalid"
    assert verify(provider, headers, reserialised, SECRET).signature == "valid"


@pytest.mark.parametrize(
    ("provider", "header"), [("github", "X-Hub-Signature-256"), ("gitlab", "X-Gitlab-Token"), ("gitea", "X-Gitea-Signature")]
)
def test_a_missing_signature_is_missing_and_names_the_header(provider, header):
    verdict = verify(provider, provider_headers(provider, BODY, secret=None, event="push"), BODY, SECRET)
    assert verdict.signature == "missing"
    assert header in verdict.message


def test_github_signatures_need_the_sha256_prefix():
    headers = {"X-GitHub-Event": "push", "X-Hub-Signature-256": hmac_hex(SECRET, BODY)}
    assert verify("github", headers, BODY, SECRET).signature == "invalid"


def test_a_sha1_only_github_signature_is_refused_and_says_why():
    headers = {"X-GitHub-Event": "push", "X-Hub-Signature": "sha1=0123"}
    verdict = verify("github", headers, BODY, SECRET)
    assert verdict.signature == "missing" and "SHA-1" in verdict.message


def test_a_gitea_signature_with_githubs_prefix_is_invalid():
    headers = {"X-Gitea-Event": "push", "X-Gitea-Signature": "sha256=" + hmac_hex(SECRET, BODY)}
    assert verify("gitea", headers, BODY, SECRET).signature == "invalid"


def test_a_signature_with_non_ascii_characters_is_invalid_not_an_error():
    headers = {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=é"}
    assert verify("github", headers, BODY, SECRET).signature == "invalid"
    assert verify("gitlab", {"X-Gitlab-Token": "sécret"}, BODY, SECRET).signature == "invalid"


def test_an_app_without_a_secret_accepts_nothing():
    headers = {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": ""}
    assert verify("gitlab", headers, BODY, "").signature == "invalid"
