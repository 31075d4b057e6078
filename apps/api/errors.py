"""One JSON shape for every API error: {"error": {"code": …, "message": …, "field": …}}."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def _first_message(detail: Any) -> tuple[str, str | None]:
    """Return the first message in a DRF error detail and the field it belongs to."""
    if isinstance(detail, dict):
        for field, value in detail.items():
            message, _ = _first_message(value)
            return message, (None if field == "non_field_errors" else str(field))
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    return str(detail), None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    code = getattr(exc, "default_code", "error")
    if isinstance(exc, exceptions.APIException):
        detail = exc.detail
        message, field = _first_message(detail)
        codes = exc.get_codes()
        if isinstance(exc, exceptions.ValidationError):
            code = "invalid"
        elif isinstance(codes, str):
            code = codes
    else:
        message, field = str(exc), None
    response.data = {"error": {"code": code, "message": message, "field": field}}
    return response
