"""Which deploy actions an app offers, over every state."""

from __future__ import annotations

import pytest

from apps.deployments.actions import Action, ActionNotAllowed, AppState, available_actions, require

R, RB, DN, RO, C, S = Action.REDEPLOY, Action.REBUILD, Action.DEPLOY_NEW, Action.ROLLBACK, Action.CANCEL, Action.STOP


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (AppState("git", None), [RB]),
        (AppState("image", None), [DN]),
        (AppState("git", "pending"), [RB, C]),
        (AppState("git", "building"), [RB, C]),
        (AppState("git", "deploying", current_has_image=True), [RB, C, S]),
        (AppState("git", "live", current_has_image=True, any_live=True), [R, RB, S]),
        (AppState("image", "live", current_has_image=True, any_live=True, rollback_targets=2), [R, DN, RO, S]),
        # a failed build has no image to redeploy
        (AppState("git", "failed"), [RB]),
        # a failed rollout leaves the previous deployment serving
        (AppState("git", "failed", current_has_image=True, any_live=True, rollback_targets=1), [R, RB, RO, S]),
        (AppState("image", "stopped", current_has_image=True), [R, DN]),
        (AppState("image", "stopped", current_has_image=False), [DN]),
    ],
)
def test_the_actions_follow_from_the_state(state, expected):
    assert available_actions(state) == expected


def test_an_action_not_offered_is_refused_naming_the_state():
    with pytest.raises(ActionNotAllowed, match="Redeploy is not available while the app's current deployment is building"):
        require(Action.REDEPLOY, AppState("git", "building"))


def test_rebuild_is_never_offered_to_image_apps_nor_deploy_new_to_git_apps():
    for status in (None, "pending", "building", "deploying", "live", "failed", "stopped"):
        assert RB not in available_actions(AppState("image", status, True, True, 1))
        assert DN not in available_actions(AppState("git", status, True, True, 1))
