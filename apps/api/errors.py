"""One JSON shape for every API error: {"error": {"code": …, "message": …, "field": …}}.

| status | code                                   | when                                                  |
| ------ | -------------------------------------- | ----------------------------------------------------- |
| 400    | invalid, parse_error                   | a field or parameter is wrong (``field`` names it)    |
| 401    | not_authenticated, authentication_failed | no credentials, or a bad or revoked token           |
| 403    | permission_denied                      | signed in, but the action needs a team owner or staff |
| 404    | not_found                              | no such object, or not one the caller may see         |
| 405    | method_not_allowed                     | the path exists, the method does not                  |
| 409    | action_not_allowed                     | the action is not offered in the app's current state  |
| 422    | unprocessable                          | well-formed, but the world disagrees (no such branch) |
| 429    | throttled                              | too many failed token attempts from one address       |
| 503    | unavailable                            | a dependency (git host, cluster) cannot answer now    |
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from apps.deployments.actions import ActionNotAllowed


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "action_not_allowed"
    default_detail = "The action is not available in the app's current state."


class Unprocessable(exceptions.APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = "unprocessable"
    default_detail = "The request is well-formed but cannot be carried out."


class Unavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"
    default_detail = "A service Slipway depends on is not answering; try again shortly."


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}


def error_response(status_code: int, code: str, message: str, field: str | None = None) -> JsonResponse:
    """Return the error shape from plain Django views (outside DRF)."""
    return JsonResponse(error_body(code, message, field), status=status_code)


def _first_message(detail: Any) -> tuple[str, str | None]:
    """Return the first message in a DRF error detail and the field it belongs to."""
    if isinstance(detail, dict):
        for field, value in detail.items():
            message, inner = _first_message(value)
            name = None if field in ("non_field_errors", "__all__") else str(field)
            if inner and name:
                name = f"{name}.{inner}"
            return message, name or inner
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    return str(detail), None


def _first_code(codes: Any) -> str | None:
    if isinstance(codes, dict):
        for value in codes.values():
            return _first_code(value)
    if isinstance(codes, list) and codes:
        return _first_code(codes[0])
    return codes if isinstance(codes, str) else None


def as_api_exception(exc: Exception) -> Exception:
    """Translate the domain's exceptions into the API's."""
    if isinstance(exc, ActionNotAllowed):
        return Conflict(str(exc))
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            return exceptions.ValidationError(
                {field: [m for e in errors for m in e.messages] for field, errors in exc.error_dict.items()}
            )
        return exceptions.ValidationError(exc.messages)
    if isinstance(exc, ObjectDoesNotExist):
        return exceptions.NotFound(f"{exc}")
    return exc


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    exc = as_api_exception(exc)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.APIException):
        message, field = _first_message(exc.detail)
        validation = isinstance(exc, exceptions.ValidationError)
        code = "invalid" if validation else (_first_code(exc.get_codes()) or str(exc.default_code))
    else:
        message, field, code = str(exc), None, "error"
    response.data = error_body(code, message, field)
    return response
