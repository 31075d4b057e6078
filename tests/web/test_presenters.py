"""Pure presentation rules: badges, health wording, phase durations, env parsing, log step markers."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from apps.deployments.health import REASON_MEANINGS
from apps.deployments.lifecycle import MEANINGS
from apps.web import presenters

T0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def deployment(status, **stamps):
    fields = {"created_at": T0, "building_at": None, "deploying_at": None, "live_at": None, "failed_at": None, "stopped_at": None}
    fields.update(stamps)
    return SimpleNamespace(status=status, **fields)


@pytest.mark.parametrize("status", list(MEANINGS))
def test_every_status_badge_says_its_name_and_meaning_in_words(status):
    badge = presenters.status_badge(status)
    assert badge.label == status
    assert badge.meaning == MEANINGS[status]
    assert badge.icon  # a shape as well as a colour


def test_an_app_never_deployed_says_so():
    assert presenters.status_badge(None).label == "not deployed"


def test_no_health_indicator_while_there_is_nothing_to_judge():
    assert presenters.health_indicator("none", "") is None


def test_no_health_indicator_while_the_app_is_healthy():
    assert presenters.health_indicator("healthy", "") is None


@pytest.mark.parametrize("reason", [r for r in REASON_MEANINGS if "{" not in r])
def test_an_unhealthy_app_shows_the_reason_and_the_specs_meaning(reason):
    indicator = presenters.health_indicator("unhealthy", reason)
    assert (indicator.label, indicator.reason, indicator.meaning) == ("Unhealthy", reason, REASON_MEANINGS[reason])


def test_an_exit_reason_gets_the_meaning_of_the_exit_row():
    indicator = presenters.health_indicator("unhealthy", "OOMKilled (exit 137)")
    assert indicator.reason == "OOMKilled (exit 137)"
    assert indicator.meaning.startswith("The app's process exited unexpectedly")


def test_a_git_deployment_that_went_live_has_three_finished_phases():
    d = deployment("live", building_at=at(4), deploying_at=at(90), live_at=at(130))
    phases = presenters.phase_durations(d, now=at(1000))
    assert [(p.name, p.seconds, p.running) for p in phases] == [
        ("pending", 4, False),
        ("building", 86, False),
        ("deploying", 40, False),
    ]


def test_an_image_deployment_has_no_building_phase():
    d = deployment("live", deploying_at=at(2), live_at=at(20))
    assert [(p.name, p.seconds) for p in presenters.phase_durations(d, now=at(100))] == [("pending", 2), ("deploying", 18)]


def test_the_phase_under_way_counts_up_to_now():
    d = deployment("building", building_at=at(5))
    phases = presenters.phase_durations(d, now=at(65))
    assert [(p.name, p.seconds, p.running) for p in phases] == [("pending", 5, False), ("building", 60, True)]


def test_a_build_that_failed_ends_its_phase_at_the_failure():
    d = deployment("failed", building_at=at(5), failed_at=at(50))
    assert [(p.name, p.seconds) for p in presenters.phase_durations(d, now=at(999))] == [("pending", 5), ("building", 45)]


def test_a_redeploy_in_progress_counts_from_its_own_start():
    d = deployment("deploying", building_at=at(1), deploying_at=at(500))
    phases = presenters.phase_durations(d, now=at(530))
    assert phases[-1] == presenters.Phase("deploying", 30, True)


@pytest.mark.parametrize(("seconds", "text"), [(None, "—"), (4.4, "4s"), (125, "2m 05s"), (3780, "1h 03m")])
def test_durations_read_short(seconds, text):
    assert presenters.duration_text(seconds) == text


def test_a_digest_is_cut_for_tables():
    assert presenters.image_short("r/shop@sha256:" + "ab" * 32) == "r/shop@sha256:abababababab"
    assert presenters.image_short("r/shop:v1") == "r/shop:v1"


def test_env_lines_parse_names_and_values_with_equals_signs():
    values, errors = presenters.parse_env_lines("# comment\nDATABASE_URL=postgres://a/b?x=1\n\nDEBUG=\n")
    assert values == {"DATABASE_URL": "postgres://a/b?x=1", "DEBUG": ""}
    assert errors == []


def test_env_lines_without_an_equals_sign_or_set_twice_are_named_by_line():
    _, errors = presenters.parse_env_lines("DEBUG\nA=1\nA=2")
    assert errors == ["Line 1: write NAME=value, e.g. DATABASE_URL=postgres://db/shop.", "Line 3: A is set twice."]


def test_log_sections_mark_each_step_where_it_starts():
    lines = [SimpleNamespace(step=s) for s in ["clone", "clone", "plan", "build", "build", "push"]]
    sections = presenters.step_sections(lines)
    assert [(step, len(ls)) for step, ls in sections] == [("clone", 2), ("plan", 1), ("build", 2), ("push", 1)]


def test_a_streamed_batch_that_continues_a_step_gets_no_second_marker():
    lines = [SimpleNamespace(step=s) for s in ["build", "push"]]
    assert [step for step, _ in presenters.step_sections(lines, previous_step="build")] == ["", "push"]


def test_pod_names_are_shown_when_several_pods_speak_or_are_expected():
    assert not presenters.pod_labels_needed(["web-1", "web-1"], 1)
    assert presenters.pod_labels_needed(["web-1", "web-2"], 1)
    assert presenters.pod_labels_needed(["web-1"], 3)


def test_service_errors_on_unknown_fields_become_form_errors():
    mapped = presenters.message_dict_to_fields({"name": ["bad"], "__all__": ["clash"], "webhook_id": ["x"]}, ["name", "port"])
    assert mapped == {"name": ["bad"], None: ["clash", "x"]}


def test_times_read_just_now_then_how_long_ago():
    from django.utils import timezone

    from apps.web.templatetags.slipway_ui import ago

    now = timezone.now()
    assert ago(now - dt.timedelta(seconds=20)) == "just now"
    assert ago(now - dt.timedelta(minutes=42, seconds=5)) == "42\xa0minutes ago"
    assert ago(None) == ""
