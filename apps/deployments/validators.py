"""Validation of what people type: app names, repository URLs, image references, env var names.

Each validator raises ValidationError with a message that says what is wrong and what is allowed.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

# Apps become namespaces, Deployments, Services and host names: a DNS-1123 label,
# short enough that "slipway-<name>" and "<name>-build-<n>" stay within 63 characters.
APP_NAME_MAX = 40
APP_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# "system" and "builds" would take namespaces Slipway uses itself (slipway-system, slipway-builds).
RESERVED_APP_NAMES = frozenset(
    {"admin", "api", "www", "static", "webhooks", "slipway", "system", "kube-system", "kube-public", "default", "builds"}
)

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ENV_NAME_MAX = 255

# https://github.com/distribution/reference/blob/main/reference.go (grammar, simplified to one regex)
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = (
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
)
IMAGE_REPOSITORY_RE = re.compile(rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*$")
IMAGE_TAG_RE = re.compile(r"^[\w][\w.-]{0,127}$")
GIT_SSH_RE = re.compile(r"^(?:ssh://[\w.-]+@[\w.-]+(?::\d+)?/\S+|[\w.-]+@[\w.-]+:[\w./~-]+)$")
BRANCH_INVALID_RE = re.compile(r"(^[/.]|\.\.|[\x00-\x20~^:?*\[\\]|@\{|/$|\.lock$|//|\.$)")


def validate_app_name(name: str) -> None:
    if len(name) > APP_NAME_MAX:
        raise ValidationError(f"App names are at most {APP_NAME_MAX} characters; this one has {len(name)}.")
    if not APP_NAME_RE.match(name):
        raise ValidationError(
            "App names use lowercase letters, digits and hyphens, start with a letter "
            "and end with a letter or digit (a DNS label), e.g. 'my-app'."
        )
    if name in RESERVED_APP_NAMES:
        raise ValidationError(f"'{name}' is reserved; choose another name.")


def validate_repo_url(url: str) -> None:
    if GIT_SSH_RE.match(url):
        return
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.hostname:
        if parts.password:
            raise ValidationError("Put credentials in the credentials field, not in the repository URL.")
        return
    raise ValidationError(
        "Use an https:// or ssh git URL, e.g. https://github.com/acme/shop.git or git@github.com:acme/shop.git "
        "(file:// and local paths are not allowed)."
    )


def validate_branch(branch: str) -> None:
    if not branch or BRANCH_INVALID_RE.search(branch):
        raise ValidationError("Not a valid git branch name, e.g. 'main' or 'feature/login'.")


def validate_image_url(image: str) -> None:
    if "@" in image or (":" in image.rsplit("/", 1)[-1]):
        raise ValidationError("Give the image without a tag or digest (the tag has its own field), e.g. ghcr.io/acme/shop.")
    if not IMAGE_REPOSITORY_RE.match(image):
        raise ValidationError(
            "Not a valid image reference: use lowercase letters, digits, '.', '_', '-' and '/', "
            "optionally after a registry host, e.g. docker.io/library/nginx or 127.0.0.1:5000/shop."
        )


def validate_image_tag(tag: str) -> None:
    if not IMAGE_TAG_RE.match(tag):
        raise ValidationError("Not a valid image tag: up to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'.")


def validate_env_name(name: str) -> None:
    if len(name) > ENV_NAME_MAX or not ENV_NAME_RE.match(name):
        raise ValidationError(
            "Environment variable names use letters, digits and underscores and do not start with a digit, e.g. DATABASE_URL."
        )
