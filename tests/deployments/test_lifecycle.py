"""The status lifecycle: the allowed table, compare-and-set, stamps, events, one live per app."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from apps.deployments import lifecycle
from apps.deployments.lifecycle import ALLOWED, IllegalTransition, Status, transition
from apps.deployments.models import Deployment, Event
from tests.factories import DeploymentFactory

pytestmark = pytest.mark.django_db

ALL = [s.value for s in Status]
EXPECTED_EDGES = {
    ("pending", "building"), ("pending", "deploying"), ("pending", "failed"), ("pending", "stopped"),
    ("building", "deploying"), ("building", "failed"), ("building", "stopped"),
    ("deploying", "live"), ("deploying", "failed"), ("deploying", "stopped"),
    ("live", "deploying"), ("live", "stopped"),
    ("failed", "deploying"), ("stopped", "deploying"),
}  # fmt: skip


def walk(deployment: Deployment, *path: Status) -> Deployment:
    for to in path:
        transition(deployment, to=to)
    return deployment


def test_the_statuses_are_exactly_the_six_of_the_spec():
    assert ALL == ["pending", "building", "deploying", "live", "failed", "stopped"]
    assert set(lifecycle.MEANINGS) == set(ALL)


def test_the_allowed_table_is_the_designed_one():
    edges = {(frm, to) for frm, tos in ALLOWED.items() for to in tos}
    assert edges == EXPECTED_EDGES


@pytest.mark.parametrize("frm", ALL)
@pytest.mark.parametrize("to", ALL)
def test_every_transition_outside_the_table_raises(frm, to, shop):
    deployment = DeploymentFactory(app=shop)
    Deployment.objects.filter(pk=deployment.pk).update(status=frm)
    deployment.refresh_from_db()
    if (frm, to) in EXPECTED_EDGES:
        assert transition(deployment, to=to, reason="test") is True
        assert deployment.status == to
    else:
        with pytest.raises(IllegalTransition):
            transition(deployment, to=to)
        deployment.refresh_from_db()
        assert deployment.status == frm


def test_a_git_deployment_walks_to_live_with_a_stamp_and_an_event_per_phase(shop):
    deployment = walk(DeploymentFactory(app=shop), Status.BUILDING, Status.DEPLOYING, Status.LIVE)
    assert deployment.building_at <= deployment.deploying_at <= deployment.live_at
    events = list(Event.objects.filter(deployment=deployment, kind="status").values_list("from_value", "to_value"))
    assert events == [("pending", "building"), ("building", "deploying"), ("deploying", "live")]


def test_an_image_deployment_skips_building(shop):
    deployment = walk(DeploymentFactory(app=shop), Status.DEPLOYING, Status.LIVE)
    assert deployment.building_at is None and deployment.status == "live"


def test_failing_stores_the_error_and_the_event_reason(shop):
    deployment = walk(DeploymentFactory(app=shop), Status.BUILDING)
    transition(deployment, to=Status.FAILED, error="clone failed: commit 3f2a9c1 not found on branch main")
    assert deployment.error == "clone failed: commit 3f2a9c1 not found on branch main"
    assert deployment.failed_at is not None
    assert Event.objects.filter(deployment=deployment).last().reason == deployment.error


def test_a_compare_and_set_that_lost_the_race_changes_nothing(shop):
    deployment = walk(DeploymentFactory(app=shop), Status.BUILDING)
    stale = Deployment.objects.get(pk=deployment.pk)
    transition(deployment, to=Status.STOPPED, reason="cancelled by alice")
    assert transition(stale, to=Status.DEPLOYING, expect={Status.BUILDING}) is False
    assert stale.status == "stopped"
    assert Deployment.objects.get(pk=deployment.pk).stopped_reason == "cancelled by alice"


def test_going_live_stops_the_previous_live_deployment_as_superseded(shop):
    first = walk(DeploymentFactory(app=shop, number=1), Status.DEPLOYING, Status.LIVE)
    second = walk(DeploymentFactory(app=shop, number=2), Status.DEPLOYING, Status.LIVE)
    first.refresh_from_db()
    assert (first.status, first.stopped_reason) == ("stopped", "superseded by #2")
    assert second.status == "live"
    assert Deployment.objects.filter(app=shop, status="live").count() == 1


def test_the_database_refuses_a_second_live_deployment_for_an_app(shop):
    DeploymentFactory(app=shop, number=1)
    DeploymentFactory(app=shop, number=2)
    Deployment.objects.filter(app=shop, number=1).update(status="live")
    with pytest.raises(IntegrityError), transaction.atomic():
        Deployment.objects.filter(app=shop, number=2).update(status="live")


def test_redeploy_takes_a_live_deployment_back_to_deploying_and_clears_its_outcome(shop):
    deployment = walk(DeploymentFactory(app=shop), Status.DEPLOYING, Status.LIVE)
    transition(deployment, to=Status.DEPLOYING, reason="redeploy requested by alice")
    assert deployment.status == "deploying" and deployment.live_at is None
