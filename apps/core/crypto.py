"""Encryption at rest for secrets (env var values, webhook secrets, git credentials).

Fernet (AES-128-CBC with HMAC-SHA256) from the ``cryptography`` package. The keys
are ``settings.ENCRYPTION_KEYS``, newest first, so a key can be rotated: values are
encrypted with the first key and decrypt with any.
"""

from __future__ import annotations

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

KEY_HELP = (
    "Set SLIPWAY_ENCRYPTION_KEYS to one or more comma-separated Fernet keys, newest first. "
    "Make one with: python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
)


class DecryptionError(Exception):
    """A stored secret cannot be decrypted with any configured key."""


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    if not keys:
        raise ImproperlyConfigured(f"SLIPWAY_ENCRYPTION_KEYS is not set. {KEY_HELP}")
    fernets = []
    for position, key in enumerate(keys, start=1):
        try:
            fernets.append(Fernet(key.encode()))
        except (ValueError, TypeError):
            raise ImproperlyConfigured(
                f"SLIPWAY_ENCRYPTION_KEYS: key {position} is not a valid Fernet key "
                f"(32 url-safe base64-encoded bytes). {KEY_HELP}"
            ) from None
    return MultiFernet(fernets)


def check_keys() -> None:
    """Raise ImproperlyConfigured unless the configured keys are usable."""
    _fernet(tuple(settings.ENCRYPTION_KEYS))


def encrypt(plaintext: str) -> str:
    """Return the token that stores ``plaintext``."""
    return _fernet(tuple(settings.ENCRYPTION_KEYS)).encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    """Return the plaintext of a stored token."""
    try:
        return _fernet(tuple(settings.ENCRYPTION_KEYS)).decrypt(token.encode()).decode()
    except InvalidToken:
        raise DecryptionError(
            "a stored secret cannot be decrypted with SLIPWAY_ENCRYPTION_KEYS: the key that encrypted it is missing or wrong"
        ) from None
