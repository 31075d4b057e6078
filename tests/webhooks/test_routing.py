"""Whether a delivery deploys: pushes to the app's branch do, everything else is ignored with a reason."""

from __future__ import annotations

import pytest

from apps.webhooks.parsing import Kind, PushEvent
from apps.webhooks.routing import decide, skip_marker

SHA = "3f2a9c1d0e5b7a8c9d0e1f2a3b4c5d6e7f8a9b0c"


def push(branch: str = "main", message: str = "Fix checkout") -> PushEvent:
    return PushEvent(Kind.PUSH, event="push", ref=f"refs/heads/{branch}", branch=branch, commit_sha=SHA, message=message)


def test_a_push_to_the_apps_branch_deploys():
    decision = decide(push("main"), source="git", branch="main")
    assert decision.deploy and decision.reason == "push to main: 3f2a9c1"


def test_a_push_to_another_branch_is_ignored_naming_both():
    decision = decide(push("feature/login"), source="git", branch="main")
    assert not decision.deploy and decision.reason == "push to feature/login; this app deploys main"


def test_a_branch_whose_name_ends_like_the_apps_branch_is_another_branch():
    assert not decide(push("feature/main"), source="git", branch="main").deploy
    assert decide(push("feature/main"), source="git", branch="feature/main").deploy


@pytest.mark.parametrize("message", ["Fix typo [skip deploy]", "[skip ci] docs", "Docs\n\n[CI SKIP]", "wip [Deploy Skip]"])
def test_a_commit_asking_to_skip_is_ignored(message):
    decision = decide(push(message=message), source="git", branch="main")
    assert not decision.deploy
    assert decision.reason.startswith("commit 3f2a9c1 asks to skip with [")


def test_a_message_merely_mentioning_skipping_deploys():
    assert skip_marker("skip ci checks for docs") == ""
    assert decide(push(message="skip deploy of the old banner"), source="git", branch="main").deploy


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (PushEvent(Kind.TAG, tag="v1.0.0"), "tag v1.0.0 does not deploy; only pushes to a branch do"),
        (PushEvent(Kind.BRANCH_DELETE, branch="main"), "branch main was deleted"),
        (PushEvent(Kind.PING, note="Keep it logically awesome."), "ping: Keep it logically awesome."),
        (PushEvent(Kind.PING, note="test delivery", branch="main"), "ping: test delivery"),
        (PushEvent(Kind.OTHER, event="issues", note="issues events do not deploy"), "issues events do not deploy"),
    ],
)
def test_tags_deletions_pings_and_other_events_are_ignored_with_a_reason(event, reason):
    decision = decide(event, source="git", branch="main")
    assert (decision.deploy, decision.reason) == (False, reason)


def test_an_image_app_does_not_deploy_from_pushes():
    decision = decide(push("main"), source="image", branch="main")
    assert (decision.deploy, decision.reason) == (False, "this app deploys an image, not a git branch")
