"""Model fields that encrypt their value at rest."""

from __future__ import annotations

from typing import Any

from django.db import models

from apps.core import crypto


class EncryptedTextField(models.TextField):
    """A text field stored as a Fernet token; reads give the plaintext."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        if value is None or value == "":
            return value
        return crypto.decrypt(value)

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return crypto.encrypt(value)


class Secret(str):
    """A string that never shows itself in repr, logs or tracebacks."""

    def __repr__(self) -> str:
        return "Secret('********')"
