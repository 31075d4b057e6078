"""API token authentication: ``Authorization: Bearer slp_…``, with failed attempts rate-limited per address."""

from __future__ import annotations

import math
from typing import Any

from django.http import HttpRequest
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from apps.accounts.models import ApiToken
from apps.accounts.services import api_token_authenticate
from apps.api.throttling import AuthFailureLimiter, client_ip


class TooManyFailures(exceptions.Throttled):
    def __init__(self, wait: float) -> None:
        seconds = max(1, math.ceil(wait))
        super().__init__(wait=seconds, detail=f"Too many failed token attempts from this address; try again in {seconds} s.")


def bearer_token(header: str) -> str | None:
    """Return the raw token from an Authorization header, None when it is not a Bearer one.

    Raises AuthenticationFailed for a Bearer header without exactly one token.
    """
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    raw = raw.strip()
    if not raw or " " in raw:
        raise exceptions.AuthenticationFailed("Malformed Authorization header: use 'Bearer <token>'.")
    return raw


def authenticate_token(meta: dict[str, Any], header: str) -> ApiToken | None:
    """Return the token a request presents, None when it presents none; raise on a bad one or when throttled."""
    raw = bearer_token(header)
    if raw is None:
        return None
    limiter = AuthFailureLimiter()
    ip = client_ip(meta)
    wait = limiter.retry_after(ip)
    if wait is not None:
        raise TooManyFailures(wait)
    token = api_token_authenticate(raw=raw)
    if token is None:
        limiter.record_failure(ip)
        raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
    return token


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        http_request: HttpRequest = request._request
        token = authenticate_token(http_request.META, header)
        if token is None:
            return None
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
