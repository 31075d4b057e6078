"""Pure parts of kubesim: rule matching, formatting and path remapping (no cluster)."""

from __future__ import annotations

import json

import pytest

from kubesim import behaviours as bh
from kubesim.hostrun import expand, remap
from kubesim.runtime import go_duration


def _pod(
    image: str = "shop:1", *, ns: str = "apps", env: dict | None = None, annotations: dict | None = None
) -> tuple[dict, dict]:
    container = {"name": "web", "image": image, "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}
    pod = {
        "metadata": {"name": "p", "namespace": ns, "annotations": annotations or {}},
        "spec": {"restartPolicy": "Always", "containers": [container]},
    }
    return pod, container


def _rules(**rules: dict) -> list[bh.Rule]:
    parsed, errors = bh.parse_rules({k: json.dumps(v) for k, v in rules.items()})
    assert errors == {}
    return parsed


def test_it_defaults_to_healthy_for_services_and_exit_for_jobs_and_init_containers():
    pod, c = _pod()
    assert bh.resolve([], pod, c, init=False).type == "healthy"
    assert bh.resolve([], pod, c, init=True).type == "exit"
    pod["spec"]["restartPolicy"] = "Never"
    assert bh.resolve([], pod, c, init=False).type == "exit"


def test_the_most_specific_rule_wins():
    rules = _rules(
        everything={"match": {"image": "*"}, "behaviour": {"type": "crash"}},
        shop={"match": {"image": "shop:*"}, "behaviour": {"type": "oom"}},
        shop_in_apps={"match": {"image": "shop:*", "namespace": "apps"}, "behaviour": {"type": "never_ready"}},
    )
    pod, c = _pod()
    assert bh.resolve(rules, pod, c, init=False).type == "never_ready"
    other, c2 = _pod(ns="other")
    assert bh.resolve(rules, other, c2, init=False).type == "oom"
    assert bh.resolve(rules, *_pod("db:1"), init=False).type == "crash"


def test_a_later_rule_wins_a_tie_and_priority_beats_specificity():
    rules = _rules(
        a={"match": {"image": "shop:*"}, "behaviour": {"type": "crash"}, "order": 2},
        b={"match": {"image": "shop:*"}, "behaviour": {"type": "oom"}, "order": 1},
        c={"match": {}, "behaviour": {"type": "never_ready"}, "priority": 5},
    )
    assert bh.resolve(rules[:2], *_pod(), init=False).type == "crash"
    assert bh.resolve(rules, *_pod(), init=False).type == "never_ready"


def test_env_rules_match_literal_env_values_and_annotations_override_rules():
    rules = _rules(build={"match": {"env": {"SLIPWAY_COMMIT": "abc*"}}, "behaviour": {"type": "exit", "exit_code": 1}})
    pod, c = _pod(env={"SLIPWAY_COMMIT": "abc123"})
    assert bh.resolve(rules, pod, c, init=False)["exit_code"] == 1
    pod, c = _pod(env={"SLIPWAY_COMMIT": "abc123"}, annotations={bh.ANNOTATION + ".web": '{"type": "oom", "after": 1}'})
    chosen = bh.resolve(rules, pod, c, init=False)
    assert (chosen.type, chosen["after"]) == ("oom", 1)


def test_bad_rules_are_reported_not_applied():
    rules, errors = bh.parse_rules(
        {
            "typo": json.dumps({"match": {"imgae": "x"}, "behaviour": "crash"}),
            "unknown": json.dumps({"behaviour": {"type": "explode"}}),
            "field": json.dumps({"behaviour": {"type": "crash", "afer": 1}}),
            "good": json.dumps({"behaviour": "crash"}),
        }
    )
    assert [r.name for r in rules] == ["good"]
    assert set(errors) == {"typo", "unknown", "field"}
    with pytest.raises(bh.BehaviourError):
        bh.make_behaviour({"type": "crash", "afer": 1})


def test_defaults_are_filled_in():
    crash = bh.make_behaviour("crash")
    assert (crash["after"], crash["exit_code"], crash["backoff"], crash["max_backoff"]) == (2.0, 1, 10.0, 300.0)


def test_fake_digest_is_deterministic_and_depends_on_env_and_image():
    d = bh.fake_digest("img:1", {"A": "1"})
    assert d == bh.fake_digest("img:1", {"A": "1"})
    assert d.startswith("sha256:") and len(d) == len("sha256:") + 64
    assert d != bh.fake_digest("img:1", {"A": "2"}) != bh.fake_digest("img:2", {"A": "1"})


@pytest.mark.parametrize(
    ("seconds", "text"), [(10, "10s"), (20, "20s"), (80, "1m20s"), (300, "5m0s"), (0.3, "300ms"), (2.5, "2.5s")]
)
def test_back_off_durations_read_like_go(seconds, text):
    assert go_duration(seconds) == text


def test_remap_rewrites_whole_path_components_only():
    mounts = [("/workspace", "/h/ws"), ("/data", "/h/data"), ("/dev/termination-log", "/h/t")]
    assert remap("cd /workspace/src && ls /data", mounts) == "cd /h/ws/src && ls /h/data"
    assert remap("/database /x/data", mounts) == "/database /x/data"
    assert remap("echo ok > /dev/termination-log", mounts) == "echo ok > /h/t"


def test_expand_follows_kubernetes_dollar_parentheses():
    env = {"REPO": "/r", "C": "abc"}
    assert (
        expand("git clone $(REPO) && git checkout $(C) $(MISSING) $$(C)", env)
        == "git clone /r && git checkout abc $(MISSING) $(C)"
    )
