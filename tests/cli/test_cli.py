"""The slipway command against a live server: login, apps, status, logs, and deploy --wait with its exit codes."""

from __future__ import annotations

import json
import stat

import pytest

from apps.deployments import logs, services
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import App, Deployment, LogLine
from cli.main import AUTH as AUTH_REFUSED
from cli.main import FAILED, OK, REFUSED, STOPPED, TIMEOUT, USAGE
from tests.support.git import git_daemon, make_repo

COMMIT = services.Commit("3f2a9c1d0e5b7a8c9d0e1f2a3b4c5d6e7f8a9b0c", "Fix checkout", "Alice <alice@example.com>")
IMAGE = "127.0.0.1:5000/shop@sha256:" + "a" * 64


def make_live(app, actor):
    deployment = services.deployment_create(app=app, trigger="push", actor=actor, commit=COMMIT)
    transition(deployment, to=Status.BUILDING)
    transition(deployment, to=Status.DEPLOYING, image=IMAGE)
    transition(deployment, to=Status.LIVE)
    return deployment


@pytest.fixture
def served_shop(shop, tmp_path):
    """shop's repository on a real git daemon on loopback, so Rebuild can resolve its branch."""
    repo = make_repo(tmp_path / "git")
    with git_daemon(tmp_path / "git") as daemon:
        App.objects.filter(pk=shop.pk).update(repo_url=daemon.url(repo.name))
        yield repo


def new_deployment() -> Deployment:
    return Deployment.objects.order_by("-pk").first()


# -- login -----------------------------------------------------------------------------------


def test_login_checks_the_token_and_stores_it_for_the_owner_only(live_web, slipway, token_for, alice, shop, tmp_path):
    token = token_for(alice)
    cli = slipway("login", live_web.url + "/", "--token", token)
    assert cli.wait() == OK, cli.err
    assert cli.out.startswith(f"Logged in to {live_web.url}; 1 app visible. Saved to")
    path = tmp_path / "config" / "slipway" / "config.json"
    assert json.loads(path.read_text()) == {"url": live_web.url, "token": token}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    apps = slipway("apps")  # no token in the environment: the stored one is used
    assert apps.wait() == OK, apps.err
    assert "shop" in apps.out


def test_login_with_a_bad_token_exits_with_the_auth_code(live_web, slipway, tmp_path, db):
    cli = slipway("login", live_web.url, env={"SLIPWAY_TOKEN": "slp_wrong"})
    assert cli.wait() == AUTH_REFUSED
    assert cli.err == "slipway: Invalid or revoked API token.\n"
    assert not (tmp_path / "config" / "slipway" / "config.json").exists()


def test_commands_before_login_exit_with_the_usage_code(slipway):
    cli = slipway("apps")
    assert cli.wait() == USAGE
    assert cli.err == "slipway: Not logged in: run `slipway login URL` (or set SLIPWAY_URL and SLIPWAY_TOKEN).\n"


def test_conflicting_deploy_options_are_a_usage_error(slipway):
    cli = slipway("deploy", "shop", "--rebuild", "--redeploy")
    assert cli.wait() == USAGE
    assert "not allowed with argument" in cli.err


# -- reading ---------------------------------------------------------------------------------


def test_apps_prints_a_table(logged_in, slipway, alice, shop):
    make_live(shop, alice)
    cli = slipway("apps")
    assert cli.wait() == OK, cli.err
    assert cli.out.splitlines() == [
        "NAME  TEAM  SOURCE  STATUS  DEPLOYMENT  HEALTH",
        "shop  acme  git     live    #1          -",
    ]


def test_status_with_fields_prints_only_those(logged_in, slipway, alice, shop):
    deployment = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    transition(deployment, to=Status.FAILED, error="build failed: exit 1")
    cli = slipway("status", "shop", "--fields", "status,error")
    assert cli.wait() == OK, cli.err
    assert cli.out == "status: failed\nerror: build failed: exit 1\n"


def test_status_of_an_unknown_field_or_app_is_refused(logged_in, slipway, shop):
    cli = slipway("status", "shop", "--fields", "colour")
    assert cli.wait() == REFUSED
    assert cli.err.startswith("slipway: Unknown field 'colour'")
    cli = slipway("status", "nothing-here")
    assert cli.wait() == REFUSED
    assert cli.err == "slipway: No app named 'nothing-here'.\n"


def test_logs_prints_the_current_deployments_log(logged_in, slipway, alice, shop):
    deployment = make_live(shop, alice)
    logs.append(deployment, LogLine.Step.ROLLOUT, "rollout complete: 1/1 ready")
    cli = slipway("logs", "shop")
    assert cli.wait() == OK, cli.err
    assert [line.split(" ", 1)[1] for line in cli.out.splitlines()] == [
        "[system] Deployment #1 created by alice (push).",
        "[rollout] rollout complete: 1/1 ready",
    ]


def test_logs_follow_prints_until_the_deployment_settles(logged_in, slipway, alice, shop):
    deployment = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    cli = slipway("logs", "shop", "--deployment", "1", "-f")
    cli.wait_for_output("created by alice")
    logs.append(deployment, LogLine.Step.BUILD, "exporting layers")
    transition(deployment, to=Status.FAILED, error="build failed: exit 1")
    assert cli.wait() == FAILED
    assert "[build] exporting layers" in cli.out
    assert cli.err == "Deployment #1 failed: build failed: exit 1\n"


# -- deploy --wait ---------------------------------------------------------------------------


def test_deploy_rebuild_wait_exits_0_when_live_and_prints_the_log(logged_in, slipway, alice, served_shop):
    cli = slipway("deploy", "shop", "--rebuild", "--wait", "--timeout", "60")
    cli.wait_for_output("Waiting until it settles")
    deployment = new_deployment()
    assert deployment.commit_sha == served_shop.head("main")
    transition(deployment, to=Status.BUILDING)
    logs.append(deployment, LogLine.Step.BUILD, "Successfully built")
    transition(deployment, to=Status.DEPLOYING, image=IMAGE)
    logs.append(deployment, LogLine.Step.ROLLOUT, "1 of 1 pods ready")
    transition(deployment, to=Status.LIVE)
    assert cli.wait() == OK, cli.err
    assert cli.out.splitlines()[0] == "Deployment #1 of shop (rebuild): pending. Waiting until it settles…"
    assert "[build] Successfully built" in cli.out and "[rollout] 1 of 1 pods ready" in cli.out
    assert cli.out.endswith("Deployment #1 is live.\n")


def test_deploy_wait_exits_1_with_the_crash_reason(logged_in, slipway, alice, served_shop):
    cli = slipway("deploy", "shop", "--wait", "--timeout", "60")
    cli.wait_for_output("Waiting until it settles")
    deployment = new_deployment()
    transition(deployment, to=Status.BUILDING)
    transition(deployment, to=Status.DEPLOYING, image=IMAGE)
    reason = "CrashLoopBackOff: the app keeps crashing right after it starts (exit 1)"
    transition(deployment, to=Status.FAILED, error=reason)
    assert cli.wait() == FAILED
    assert cli.err == f"Deployment #1 failed: {reason}\n"


def test_deploy_wait_exits_3_when_the_deployment_is_stopped(logged_in, slipway, alice, served_shop):
    cli = slipway("deploy", "shop", "--wait", "--timeout", "60")
    cli.wait_for_output("Waiting until it settles")
    services.deployment_cancel(deployment=new_deployment(), actor=alice)
    assert cli.wait() == STOPPED
    assert cli.err == "Deployment #1 was stopped: cancelled by alice\n"


def test_deploy_wait_exits_4_when_time_runs_out(logged_in, slipway, alice, served_shop):
    cli = slipway("deploy", "shop", "--wait", "--timeout", "3")
    assert cli.wait() == TIMEOUT
    assert cli.err == "slipway: Timed out waiting for deployment #1; it is still pending.\n"


def test_redeploy_wait_shows_only_the_new_part_of_the_log(logged_in, slipway, alice, shop):
    deployment = make_live(shop, alice)
    logs.append(deployment, LogLine.Step.ROLLOUT, "first rollout")
    cli = slipway("deploy", "shop", "--redeploy", "--wait", "--timeout", "60")
    cli.wait_for_output("Waiting until it settles")
    logs.append(deployment, LogLine.Step.ROLLOUT, "second rollout")
    transition(deployment, to=Status.LIVE)
    assert cli.wait() == OK, cli.err
    assert "second rollout" in cli.out and "first rollout" not in cli.out
    assert "Redeploy requested by alice" in cli.out


def test_deploy_wait_resumes_after_the_server_restarts(logged_in, slipway, alice, served_shop):
    cli = slipway("deploy", "shop", "--wait", "--timeout", "90")
    cli.wait_for_output("Waiting until it settles")
    deployment = new_deployment()
    transition(deployment, to=Status.BUILDING)
    logged_in.stop()  # the connection drops; what happens now is missed by the open stream
    transition(deployment, to=Status.DEPLOYING, image=IMAGE)
    transition(deployment, to=Status.LIVE)
    logged_in.start()
    assert cli.wait(timeout=90) == OK, cli.err
    assert cli.out.endswith("Deployment #1 is live.\n")


def test_deploy_of_an_action_the_app_does_not_offer_exits_6_naming_the_state(logged_in, slipway, alice, shop):
    cli = slipway("deploy", "shop", "--redeploy")
    assert cli.wait() == REFUSED
    assert cli.err == "slipway: Redeploy is not available while the app's current deployment is no deployment yet.\n"


def test_deploy_image_tag_sets_the_tag_and_deploys_it(logged_in, slipway, alice, acme):
    from tests.factories import ImageAppFactory

    ImageAppFactory(name="billing", team=acme)
    cli = slipway("deploy", "billing", "--image-tag", "v2")
    assert cli.wait() == OK, cli.err
    assert cli.out == "Deployment #1 of billing (deploy-new): pending.\n"
    assert App.objects.get(name="billing").image_tag == "v2"
