"""The OpenAPI schema: what drf-spectacular reads from the views, plus what it cannot know."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "field"],
            "properties": {
                "code": {"type": "string", "example": "action_not_allowed"},
                "message": {"type": "string"},
                "field": {"type": "string", "nullable": True, "description": "The field or parameter at fault, if any."},
            },
        }
    },
}


def add_error_shape(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Give every error response the one error body, and name the token scheme."""
    components = result.setdefault("components", {})
    components.setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    ref = {"$ref": "#/components/schemas/Error"}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for code, response in operation.get("responses", {}).items():
                if str(code).startswith(("4", "5")):
                    response["content"] = {"application/json": {"schema": ref}}
            operation.setdefault("responses", {}).setdefault(
                "429",
                {
                    "description": "Too many failed token attempts from this address.",
                    "content": {"application/json": {"schema": ref}},
                },
            )
    return result


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token (slp_…), created in the UI or with `manage.py create_api_token USERNAME NAME`.",
        }


SETTINGS = {
    "TITLE": "Slipway API",
    "VERSION": "1",
    "DESCRIPTION": "Deploy from CI and scripts: apps, deployments, actions, logs and a resumable event stream. See docs/api.md.",
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "apps.api.schema.add_error_shape"],
    "COMPONENT_SPLIT_REQUEST": True,
}
