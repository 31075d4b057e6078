"""Whether a delivery deploys: one pure rule from the event and the app to a decision with its reason."""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.webhooks.parsing import Kind, PushEvent

# The markers CI systems honour, plus our own; matched anywhere in the message, any case.
SKIP_MARKERS = ("[skip deploy]", "[deploy skip]", "[skip ci]", "[ci skip]")
_SKIP_RE = re.compile("|".join(re.escape(m) for m in SKIP_MARKERS), re.IGNORECASE)


@dataclass(frozen=True)
class Decision:
    deploy: bool
    reason: str


def skip_marker(message: str) -> str:
    """Return the skip marker in a commit message, as written, or ""."""
    match = _SKIP_RE.search(message)
    return match.group(0) if match else ""


def decide(event: PushEvent, *, source: str, branch: str) -> Decision:
    """Decide whether ``event`` deploys an app built from ``source`` (git or image) on ``branch``."""
    if event.kind == Kind.PING:
        return Decision(False, f"ping: {event.note}" if event.note else "ping")
    if event.kind == Kind.OTHER:
        return Decision(False, event.note or f"{event.event} events do not deploy")
    if event.kind == Kind.TAG:
        return Decision(False, f"tag {event.tag} does not deploy; only pushes to a branch do")
    if event.kind == Kind.BRANCH_DELETE:
        return Decision(False, f"branch {event.branch} was deleted")
    if source != "git":
        return Decision(False, "this app deploys an image, not a git branch")
    if event.branch != branch:
        return Decision(False, f"push to {event.branch}; this app deploys {branch}")
    marker = skip_marker(event.message)
    if marker:
        return Decision(False, f"commit {event.commit_sha[:7]} asks to skip with {marker}")
    return Decision(True, f"push to {branch}: {event.commit_sha[:7]}")
