"""From a provider's payload to one ``PushEvent``: pure functions, one per provider.

Payload shapes: GitHub https://docs.github.com/en/webhooks/webhook-events-and-payloads#push,
GitLab https://docs.gitlab.com/user/project/integrations/webhook_events/#push-events,
Gitea https://docs.gitea.com/usage/webhooks (push, create and delete events).
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from apps.webhooks.providers import GITEA, GITHUB, GITLAB

ZERO_SHA = "0" * 40
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
BRANCH_PREFIX = "refs/heads/"
TAG_PREFIX = "refs/tags/"

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"


class Kind(enum.StrEnum):
    PUSH = "push"
    TAG = "tag"
    BRANCH_DELETE = "branch_delete"
    PING = "ping"
    OTHER = "other"


@dataclass(frozen=True)
class PushEvent:
    """What a delivery says happened, the same for every provider."""

    kind: Kind
    event: str = ""  # the provider's name for it: push, Push Hook, delete, ping, …
    ref: str = ""
    branch: str = ""  # with its slashes: refs/heads/feature/login is feature/login
    tag: str = ""
    commit_sha: str = ""
    message: str = ""
    author: str = ""  # "Name <email>"
    pusher: str = ""
    repo_url: str = ""
    compare_url: str = ""
    note: str = ""  # why a ping or other event is what it is (GitHub's zen, the event name)


class PayloadError(ValueError):
    """The body is not a payload we can read; ``field`` names what is wrong or missing."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class UnsupportedContentType(ValueError):
    """The body comes in a content type this provider's deliveries are not read in."""


def decode_body(provider: str, content_type: str, body: bytes) -> dict[str, Any]:
    """Return the payload object from the raw body.

    JSON for every provider; GitHub and Gitea may also be set to send a form with the JSON in its
    ``payload`` field (their signature still covers the raw form body, checked before this).
    """
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == FORM and provider in (GITHUB, GITEA):
        try:
            form = parse_qs(body.decode("utf-8"), keep_blank_values=True)
        except UnicodeDecodeError:
            raise PayloadError("The form body is not UTF-8.") from None
        if "payload" not in form:
            raise PayloadError("The form body has no payload field.", "payload")
        raw: bytes | str = form["payload"][0]
    elif media_type == JSON or media_type.endswith("+json"):
        raw = body
    else:
        shown = media_type or "none"
        accepted = "application/json" if provider == GITLAB else "application/json (or application/x-www-form-urlencoded)"
        raise UnsupportedContentType(f"Content type {shown} is not supported: set the webhook's content type to {accepted}.")
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise PayloadError(
            f"The body is not valid JSON: {e}." if isinstance(e, ValueError) else "The body nests too deeply."
        ) from None
    if not isinstance(payload, dict):
        raise PayloadError("The body must be a JSON object.")
    return payload


# Reading fields ----------------------------------------------------------------------------------


def _get(payload: dict[str, Any], path: str) -> Any:
    value: Any = payload
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _required_str(payload: dict[str, Any], path: str) -> str:
    value = _get(payload, path)
    if value is None:
        raise PayloadError(f"The payload has no {path}.", path)
    if not isinstance(value, str):
        raise PayloadError(f"{path} must be a string.", path)
    return value


def _str(payload: dict[str, Any], path: str) -> str:
    value = _get(payload, path)
    return value if isinstance(value, str) else ""


def _sha(payload: dict[str, Any], path: str) -> str:
    value = _required_str(payload, path).strip().lower()
    if not SHA_RE.match(value):
        raise PayloadError(f"{path} must be a 40-character hexadecimal commit SHA.", path)
    return value


def _person(name: str, email: str) -> str:
    name, email = name.strip(), email.strip()
    if name and email:
        return f"{name} <{email}>"
    return name or email


def _commit_fields(commit: Any) -> tuple[str, str]:
    """Return (message, author) of a commit object as the three providers write it."""
    if not isinstance(commit, dict):
        return "", ""
    message = _str(commit, "message")
    return message.rstrip("\n"), _person(_str(commit, "author.name"), _str(commit, "author.email"))


def _find_commit(commits: Any, sha: str) -> dict[str, Any] | None:
    if not isinstance(commits, list):
        return None
    for commit in commits:
        if isinstance(commit, dict) and isinstance(commit.get("id"), str) and commit["id"].lower() == sha:
            return commit
    return None


def split_ref(ref: str) -> tuple[str, str]:
    """Return (branch, tag) for a full ref; branch names keep their slashes."""
    if ref.startswith(BRANCH_PREFIX):
        return ref[len(BRANCH_PREFIX) :], ""
    if ref.startswith(TAG_PREFIX):
        return "", ref[len(TAG_PREFIX) :]
    return "", ""


def _ref_event(*, event: str, ref: str, before: str, after: str, **fields: str) -> PushEvent:
    """Classify a ref update: branch push, branch deletion, tag, or a provider's test delivery."""
    branch, tag = split_ref(ref)
    if tag:
        return PushEvent(Kind.TAG, event=event, ref=ref, tag=tag, commit_sha="" if after == ZERO_SHA else after, **fields)
    if not branch:
        raise PayloadError(f"ref {ref!r} names neither a branch (refs/heads/…) nor a tag (refs/tags/…).", "ref")
    if after == ZERO_SHA:
        return PushEvent(Kind.BRANCH_DELETE, event=event, ref=ref, branch=branch, **fields)
    if before == after:
        # A real push always moves the ref. Gitea's and Gogs' "Test delivery" sends the
        # branch head as both before and after, so it is a test, not a push.
        return PushEvent(Kind.PING, event=event, ref=ref, branch=branch, commit_sha=after, note="test delivery", **fields)
    return PushEvent(Kind.PUSH, event=event, ref=ref, branch=branch, commit_sha=after, **fields)


# GitHub ------------------------------------------------------------------------------------------


def parse_github(event: str, payload: dict[str, Any]) -> PushEvent:
    """Read a GitHub delivery: ``push`` (branches and tags) and ``ping``; anything else is other."""
    if event == "ping":
        return PushEvent(Kind.PING, event=event, note=_str(payload, "zen"), repo_url=_str(payload, "repository.clone_url"))
    if event != "push":
        return PushEvent(Kind.OTHER, event=event, note=f"{event} events do not deploy")
    ref = _required_str(payload, "ref")
    after = _sha(payload, "after")
    before = _str(payload, "before").lower()
    head = payload.get("head_commit")
    if not (isinstance(head, dict) and str(head.get("id", "")).lower() == after):
        head = _find_commit(payload.get("commits"), after)
    message, author = _commit_fields(head)
    pusher = _str(payload, "pusher.name") or _str(payload, "sender.login")
    if payload.get("deleted") is True:
        after = ZERO_SHA
    return _ref_event(
        event=event,
        ref=ref,
        before=before,
        after=after,
        message=message,
        author=author,
        pusher=pusher,
        repo_url=_str(payload, "repository.clone_url") or _str(payload, "repository.html_url"),
        compare_url=_str(payload, "compare"),
    )


# GitLab ------------------------------------------------------------------------------------------

_GITLAB_PUSH_EVENTS = {"Push Hook", "Tag Push Hook", "System Hook", "Push Event", "Tag Push Event"}


def parse_gitlab(event: str, payload: dict[str, Any]) -> PushEvent:
    """Read a GitLab ``Push Hook`` or ``Tag Push Hook`` (also as a system hook); anything else is other.

    The deployed commit is ``checkout_sha``, and its message and author come from the commit in
    ``commits`` with that id (GitLab lists at most 20 commits, so it may be absent: the SHA still
    deploys). A branch deletion has ``checkout_sha: null`` and an all-zero ``after``.
    """
    if event not in _GITLAB_PUSH_EVENTS:
        return PushEvent(Kind.OTHER, event=event, note=f"{event} events do not deploy")
    kind = _required_str(payload, "object_kind")
    if kind not in ("push", "tag_push"):
        return PushEvent(Kind.OTHER, event=event, note=f"{kind} events do not deploy")
    ref = _required_str(payload, "ref")
    if not ref.startswith("refs/"):
        # System hooks and some older versions send the short name.
        ref = (TAG_PREFIX if kind == "tag_push" else BRANCH_PREFIX) + ref
    after = _sha(payload, "after")
    before = _str(payload, "before").lower()
    if payload.get("checkout_sha") is not None:
        sha = _sha(payload, "checkout_sha")
    elif kind == "push":
        sha = ZERO_SHA  # a deleted branch has nothing to check out
    else:
        sha = after
    message, author = _commit_fields(_find_commit(payload.get("commits"), sha))
    web_url = _str(payload, "project.web_url")
    compare = f"{web_url}/-/compare/{before}...{after}" if web_url and before and before != ZERO_SHA and after != ZERO_SHA else ""
    return _ref_event(
        event=event,
        ref=ref,
        before=before,
        after=sha,
        message=message,
        author=author,
        pusher=_str(payload, "user_username") or _str(payload, "user_name"),
        repo_url=_str(payload, "project.git_http_url") or _str(payload, "repository.git_http_url"),
        compare_url=compare,
    )


# Gitea and Forgejo -------------------------------------------------------------------------------


def parse_gitea(event: str, payload: dict[str, Any]) -> PushEvent:
    """Read a Gitea or Forgejo ``push``, or a ``delete`` of a branch or tag; anything else is other."""
    repo_url = _str(payload, "repository.clone_url") or _str(payload, "repository.html_url")
    if event == "delete":
        ref_type = _required_str(payload, "ref_type")
        name = _required_str(payload, "ref")
        pusher = _str(payload, "sender.username") or _str(payload, "sender.login")
        if ref_type == "branch":
            return PushEvent(
                Kind.BRANCH_DELETE, event=event, ref=BRANCH_PREFIX + name, branch=name, pusher=pusher, repo_url=repo_url
            )
        return PushEvent(Kind.TAG, event=event, ref=TAG_PREFIX + name, tag=name, pusher=pusher, repo_url=repo_url)
    if event != "push":
        return PushEvent(Kind.OTHER, event=event, note=f"{event} events do not deploy")
    ref = _required_str(payload, "ref")
    after = _sha(payload, "after")
    head = payload.get("head_commit")
    if not (isinstance(head, dict) and str(head.get("id", "")).lower() == after):
        # Older Gitea versions send no head_commit.
        head = _find_commit(payload.get("commits"), after)
    message, author = _commit_fields(head)
    return _ref_event(
        event=event,
        ref=ref,
        before=_str(payload, "before").lower(),
        after=after,
        message=message,
        author=author,
        pusher=_str(payload, "pusher.username") or _str(payload, "pusher.login") or _str(payload, "sender.username"),
        repo_url=repo_url,
        compare_url=_str(payload, "compare_url"),
    )


PARSERS = {GITHUB: parse_github, GITLAB: parse_gitlab, GITEA: parse_gitea}


def parse(provider: str, event: str, payload: dict[str, Any]) -> PushEvent:
    """Read a delivery of ``provider`` into a PushEvent; raise PayloadError naming a missing or bad field."""
    return PARSERS[provider](event, payload)
