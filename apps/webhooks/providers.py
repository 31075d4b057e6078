"""What the request headers say: which provider sent it, which event, which delivery, and whether it is signed.

Pure functions over a header mapping and the raw body bytes. Each provider's rules:

- GitHub: ``X-GitHub-Event``, ``X-GitHub-Delivery``, ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>``
  (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
- GitLab: ``X-Gitlab-Event``, ``Idempotency-Key`` or ``X-Gitlab-Event-UUID``, ``X-Gitlab-Token`` equal to the secret
  (https://docs.gitlab.com/user/project/integrations/webhooks/).
- Gitea and Forgejo: ``X-Gitea-Event``, ``X-Gitea-Delivery``, ``X-Gitea-Signature: <hex HMAC-SHA256 of the body>``;
  Forgejo sends the same values as ``X-Forgejo-*`` too. Gitea also sends GitHub's headers, so it is recognised first.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

GITHUB = "github"
GITLAB = "gitlab"
GITEA = "gitea"

# The first header present names the provider. Gitea (and Forgejo, and Gogs before them)
# send X-GitHub-* copies as well, so the Gitea family is looked for first.
_DETECT = (
    (GITEA, ("x-gitea-event", "x-forgejo-event", "x-gogs-event", "x-gitea-delivery", "x-forgejo-delivery")),
    (GITLAB, ("x-gitlab-event", "x-gitlab-token", "x-gitlab-event-uuid")),
    (GITHUB, ("x-github-event", "x-github-delivery", "x-hub-signature-256")),
)

EVENT_HEADERS = {
    GITHUB: ("X-GitHub-Event",),
    GITLAB: ("X-Gitlab-Event",),
    GITEA: ("X-Gitea-Event", "X-Forgejo-Event", "X-Gogs-Event"),
}

DELIVERY_HEADERS = {
    GITHUB: ("X-GitHub-Delivery",),
    # Idempotency-Key stays the same when GitLab retries a delivery; the event UUID is the older fallback.
    GITLAB: ("Idempotency-Key", "X-Gitlab-Event-UUID"),
    GITEA: ("X-Gitea-Delivery", "X-Forgejo-Delivery", "X-Gogs-Delivery"),
}

SIGNATURE_HEADERS = {
    GITHUB: ("X-Hub-Signature-256",),
    GITLAB: ("X-Gitlab-Token",),
    GITEA: ("X-Gitea-Signature", "X-Forgejo-Signature", "X-Gogs-Signature"),
}

VALID = "valid"
INVALID = "invalid"
MISSING = "missing"


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _first(headers: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str]:
    """Return (header name, value) of the first of ``names`` present, or ("", "")."""
    lowered = _lower(headers)
    for name in names:
        value = lowered.get(name.lower())
        if value is not None:
            return name, value.strip()
    return "", ""


def detect_provider(headers: Mapping[str, str]) -> str | None:
    """Return github, gitlab or gitea from the request headers, or None when none of them sent it."""
    lowered = _lower(headers)
    for provider, names in _DETECT:
        if any(name in lowered for name in names):
            return provider
    return None


def event_name(provider: str, headers: Mapping[str, str]) -> str:
    """Return the event the provider says this is (``push``, ``Push Hook``, …), or "" when absent."""
    return _first(headers, EVENT_HEADERS[provider])[1]


def delivery_id(provider: str, headers: Mapping[str, str]) -> str:
    """Return the provider's id for this delivery (the same on a redelivery), or "" when absent."""
    return _first(headers, DELIVERY_HEADERS[provider])[1]


@dataclass(frozen=True)
class Verdict:
    signature: str  # valid, invalid or missing
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.signature == VALID


def _hmac_hex(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _equal(a: str, b: str) -> bool:
    # Bytes, so a header with non-ASCII characters is a mismatch rather than a TypeError.
    return hmac.compare_digest(a.encode(), b.encode())


def verify(provider: str, headers: Mapping[str, str], body: bytes, secret: str) -> Verdict:
    """Check the delivery's signature against ``secret`` over the exact ``body`` bytes, in constant time.

    Messages name the header, never the secret or the expected value.
    """
    name, value = _first(headers, SIGNATURE_HEADERS[provider])
    if not secret:
        return Verdict(INVALID, "This app has no webhook secret; rotate it to create one.")
    if not value:
        return Verdict(MISSING, _missing_message(provider, headers))
    if provider == GITHUB:
        ok = _equal("sha256=" + _hmac_hex(secret, body), value.lower())
    elif provider == GITEA:
        ok = _equal(_hmac_hex(secret, body), value.lower())
    else:
        ok = _equal(secret, value)
    if ok:
        return Verdict(VALID)
    if provider == GITLAB:
        return Verdict(INVALID, "X-Gitlab-Token does not match this app's webhook secret.")
    return Verdict(INVALID, f"{name} does not match the body signed with this app's webhook secret.")


def _missing_message(provider: str, headers: Mapping[str, str]) -> str:
    if provider == GITHUB:
        if _first(headers, ("X-Hub-Signature",))[1]:
            return "X-Hub-Signature-256 is missing (only the SHA-1 X-Hub-Signature was sent); SHA-1 signatures are not accepted."
        return "X-Hub-Signature-256 is missing: set the webhook's secret to this app's webhook secret."
    if provider == GITLAB:
        return "X-Gitlab-Token is missing: set the webhook's secret token to this app's webhook secret."
    return "X-Gitea-Signature is missing: set the webhook's secret to this app's webhook secret."
