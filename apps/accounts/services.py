"""Writes for accounts: teams and API tokens."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.utils import timezone

from apps.accounts.models import ApiToken, Membership, Team, hash_token


def team_create(*, name: str, owner: User) -> Team:
    """Create a team with ``owner`` as its first member."""
    team = Team.objects.create(name=name)
    Membership.objects.create(team=team, user=owner, role=Membership.Role.OWNER)
    return team


def api_token_create(*, user: User, name: str) -> tuple[ApiToken, str]:
    """Create a token; return it with the raw value, which is never stored and shown only now."""
    raw = ApiToken.generate()
    token = ApiToken.objects.create(user=user, name=name, prefix=raw[:12], hashed=hash_token(raw))
    return token, raw


def api_token_revoke(*, token: ApiToken) -> None:
    """Revoke a token; it stops working at once."""
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


def api_token_authenticate(*, raw: str) -> ApiToken | None:
    """Return the active token for a raw value, recording its use, or None."""
    token = ApiToken.objects.active().select_related("user").filter(hashed=hash_token(raw)).first()
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    # Record use at most once a minute: a busy CI loop should not write on every call.
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
