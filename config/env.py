"""Strict helpers that read settings from the environment.

Every value comes from the environment; a secret may come from a file named by
``NAME_FILE`` instead (Docker and Kubernetes secrets are mounted as files).
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str | None = None) -> str:
    """Return the variable, or the default; fail if neither exists."""
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        try:
            with open(file_name, encoding="utf-8") as f:
                return f.read().strip()
        except OSError as e:
            raise ImproperlyConfigured(f"{name}_FILE points at {file_name!r}, which cannot be read: {e.strerror}") from e
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise ImproperlyConfigured(f"{name} is not set")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    """Return a boolean written as true/false, yes/no, on/off or 1/0."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {value!r}")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    """Return a whole number no smaller than ``minimum``."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {value!r}") from None
    if number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {number}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    """Return a comma-separated list with blanks dropped."""
    value = os.environ.get(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]
