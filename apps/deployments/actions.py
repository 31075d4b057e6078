"""Which deploy actions an app offers in its current state: one pure rule for the UI, API and admin."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from apps.deployments.lifecycle import IN_FLIGHT, Status


class Action(enum.StrEnum):
    REDEPLOY = "redeploy"
    REBUILD = "rebuild"
    DEPLOY_NEW = "deploy-new"
    ROLLBACK = "rollback"
    CANCEL = "cancel"
    STOP = "stop"

    @property
    def label(self) -> str:
        return LABELS[self]


LABELS = {
    Action.REDEPLOY: "Redeploy",
    Action.REBUILD: "Rebuild",
    Action.DEPLOY_NEW: "Deploy new",
    Action.ROLLBACK: "Rollback",
    Action.CANCEL: "Cancel",
    Action.STOP: "Stop",
}


@dataclass(frozen=True)
class AppState:
    """What the rule needs to know about an app."""

    source: str  # "git" or "image"
    current_status: str | None  # status of the current deployment; None before the first one
    current_has_image: bool = False
    any_live: bool = False  # some deployment is serving (a failed rollout leaves the previous one live)
    rollback_targets: int = 0  # earlier deployments that were live and have an image


class ActionNotAllowed(Exception):
    """An action the app does not offer in its current state."""

    def __init__(self, action: Action, state: AppState) -> None:
        self.action = action
        self.state = state
        status = state.current_status or "no deployment yet"
        super().__init__(f"{action.label} is not available while the app's current deployment is {status}.")


def available_actions(state: AppState) -> list[Action]:
    """Return the actions offered, in the order the app page shows them."""
    actions = []
    current = state.current_status
    # Redeploy re-applies the current deployment's image: it needs one, and nothing in flight.
    if current in (Status.LIVE, Status.FAILED, Status.STOPPED) and state.current_has_image:
        actions.append(Action.REDEPLOY)
    if state.source == "git":
        actions.append(Action.REBUILD)
    else:
        actions.append(Action.DEPLOY_NEW)
    if state.rollback_targets > 0:
        actions.append(Action.ROLLBACK)
    if current in IN_FLIGHT:
        actions.append(Action.CANCEL)
    if state.any_live or current == Status.DEPLOYING:
        actions.append(Action.STOP)
    return actions


def require(action: Action, state: AppState) -> None:
    """Raise ActionNotAllowed unless ``action`` is offered in ``state``."""
    if action not in available_actions(state):
        raise ActionNotAllowed(action, state)
