"""The UI in headless Chromium against the real web process: sign-in, forms, the confirm step, live updates."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from apps.deployments import logs
from apps.deployments.health import Health, HealthState
from apps.deployments.health_store import record
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import App
from tests.browser.conftest import sign_in
from tests.web.conftest import IMAGE, deploy

pytestmark = pytest.mark.browser


def test_signing_in_shows_the_apps_and_signing_out_asks_again(live, open_page, alice, shop):
    page = open_page()
    page.goto(live + "/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    sign_in(page, live, "alice")
    expect(page.get_by_role("link", name="shop", exact=True)).to_be_visible()
    expect(page.get_by_role("note")).to_contain_text("Simulated cluster: pods are simulated by kubesim; nothing really runs.")
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/$"))


def test_a_wrong_password_is_answered_on_the_form(live, open_page, alice):
    page = open_page()
    page.goto(live + "/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("Please enter a correct username and password")


def test_creating_a_git_app_shows_errors_next_to_fields_then_opens_the_app(live, open_page, alice, acme):
    page = open_page()
    sign_in(page, live, "alice")
    page.goto(live + "/new/")
    expect(page.get_by_label("Image", exact=True)).to_be_hidden()  # only the chosen source's fields
    page.get_by_label("Name", exact=True).fill("Blog!")
    page.get_by_label("Repository URL").fill("file:///srv/blog")
    page.get_by_role("button", name="Create app").click()
    expect(page.locator("#id_name_error")).to_contain_text("App names use lowercase letters")
    expect(page.locator("#id_repo_url_error")).to_contain_text("file:// and local paths are not allowed")
    expect(page.get_by_label("Name", exact=True)).to_have_attribute("aria-invalid", "true")
    page.get_by_label("Name", exact=True).fill("blog")
    page.get_by_label("Repository URL").fill("https://github.com/acme/blog.git")
    page.get_by_label("Git credentials").fill("ghp_secret_token")
    page.get_by_role("button", name="Create app").click()
    expect(page).to_have_url(live + "/apps/blog/")
    expect(page.get_by_role("heading", name="blog", exact=True)).to_be_visible()
    assert "ghp_secret_token" not in page.content()
    assert App.objects.get(name="blog").git_credentials == "ghp_secret_token"


def test_choosing_image_shows_the_image_fields(live, open_page, alice, acme):
    page = open_page()
    sign_in(page, live, "alice")
    page.goto(live + "/new/")
    page.get_by_label("Container image").check()
    expect(page.get_by_label("Image", exact=True)).to_be_visible()
    expect(page.get_by_label("Repository URL")).to_be_hidden()


def test_status_health_and_history_update_without_a_reload(live, open_page, alice, shop):
    d = deploy(shop, alice, to="building")
    page = open_page()
    sign_in(page, live, "alice")
    page.goto(live + "/apps/shop/")
    page.evaluate("window.notReloaded = true")
    status = page.locator("#status")
    expect(status).to_contain_text("building")
    transition(d, to=Status.DEPLOYING, image=IMAGE)
    expect(status).to_contain_text("deploying")
    expect(status).to_contain_text("Image pushed, controller applying K8s manifests")
    transition(d, to=Status.LIVE)
    expect(status).to_contain_text("live")
    expect(page.locator("#actions")).to_contain_text("Redeploy")
    expect(page.locator("#history")).to_contain_text("live")
    record(app_id=shop.pk, health=Health(HealthState.UNHEALTHY, "CrashLoopBackOff"), now=timezone.now())
    expect(page.locator("#health")).to_contain_text("Unhealthy: CrashLoopBackOff")
    record(app_id=shop.pk, health=Health(HealthState.HEALTHY), now=timezone.now())
    expect(page.locator("#health")).to_contain_text("No problems")
    expect(page.locator("#health")).not_to_contain_text("CrashLoopBackOff")
    assert page.evaluate("window.notReloaded") is True


def test_the_apps_list_updates_a_row_without_a_reload(live, open_page, alice, shop):
    d = deploy(shop, alice, to="building")
    page = open_page()
    sign_in(page, live, "alice")
    row = page.locator(f"#app-{shop.pk}")
    expect(row).to_contain_text("building")
    transition(d, to=Status.FAILED, error="build failed at step build: out of disk")
    expect(row).to_contain_text("failed")


def test_an_action_is_confirmed_in_a_dialog_before_it_runs(live, open_page, alice, shop):
    deploy(shop, alice, to="live")
    page = open_page()
    sign_in(page, live, "alice")
    page.goto(live + "/apps/shop/")
    page.get_by_role("link", name="Stop").click()
    dialog = page.locator("dialog[open]")
    expect(dialog).to_contain_text("Stop shop?")
    dialog.get_by_role("link", name="Keep things as they are").click()
    expect(page.locator("dialog[open]")).to_have_count(0)
    shop.refresh_from_db()
    assert shop.current_deployment.status == "live"
    page.get_by_role("link", name="Stop").click()
    page.locator("dialog[open]").get_by_role("button", name="Stop").click()
    expect(page.locator(".message-success")).to_contain_text("Stopping the app")
    expect(page.locator("#status")).to_contain_text("stopped")


def test_without_javascript_the_confirm_step_is_a_page_and_everything_still_works(live, open_page, alice, shop):
    deploy(shop, alice, to="live")
    page = open_page(javascript=False)
    sign_in(page, live, "alice")
    page.get_by_role("link", name="shop", exact=True).click()
    page.get_by_role("link", name="Redeploy").click()
    expect(page).to_have_url(live + "/apps/shop/actions/redeploy/")
    expect(page.get_by_role("heading", name="Redeploy shop?")).to_be_visible()
    page.get_by_role("button", name="Redeploy").click()
    expect(page).to_have_url(live + "/apps/shop/")
    expect(page.locator(".message-success")).to_contain_text("Redeploying #1.")
    expect(page.locator("#status")).to_contain_text("deploying")


def test_the_deploy_log_streams_follows_the_bottom_and_stops_when_the_reader_scrolls_up(live, open_page, alice, shop):
    d = deploy(shop, alice, to="building")
    page = open_page(viewport={"width": 1280, "height": 700})
    sign_in(page, live, "alice")
    page.goto(live + "/apps/shop/deployments/1/")
    box = page.locator("#log")
    logs.append_many(d, [("clone", f"cloning object {i}", timezone.now()) for i in range(60)])
    expect(box).to_contain_text("cloning object 59")
    expect(page.locator('.step-marker[data-step="clone"]')).to_have_count(1)
    at_bottom = "el => el.scrollHeight - el.scrollTop - el.clientHeight < 30"
    page.wait_for_function(f"({at_bottom})(document.getElementById('log'))")

    box.evaluate("el => { el.scrollTop = 0; el.dispatchEvent(new Event('scroll')); }")
    logs.append_many(d, [("build", f"building layer {i}", timezone.now()) for i in range(20)])
    expect(box).to_contain_text("building layer 19")
    assert box.evaluate("el => el.scrollTop") == 0  # the reader stays where they are
    jump = page.get_by_role("button", name="Jump to the latest line")
    expect(jump).to_be_visible()
    jump.click()
    page.wait_for_function(f"({at_bottom})(document.getElementById('log'))")

    transition(d, to=Status.FAILED, error="build failed at step build: no space left on device")
    error = page.locator(".error-box")
    expect(error).to_contain_text("no space left on device")
    assert error.bounding_box()["y"] < box.bounding_box()["y"]


def test_an_outsider_gets_404_on_someone_elses_app(live, open_page, charlie, shop):
    page = open_page()
    sign_in(page, live, "charlie")
    response = page.goto(live + "/apps/shop/")
    assert response.status == 404
    assert page.get_by_role("link", name="shop", exact=True).count() == 0


def test_the_app_page_fits_a_phone_screen(live, open_page, alice, shop):
    deploy(shop, alice, to="live")
    page = open_page(viewport={"width": 390, "height": 844})
    sign_in(page, live, "alice")
    page.goto(live + "/apps/shop/")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    expect(page.get_by_role("link", name="Redeploy")).to_be_visible()


def test_the_keyboard_reaches_the_skip_link_first_and_focus_is_visible(live, open_page, alice, shop):
    page = open_page()
    sign_in(page, live, "alice")
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.textContent")
    assert focused == "Skip to content"


def test_a_stream_opened_again_after_an_error_asks_for_what_came_after_the_last_id(live, open_page, alice, shop):
    d = deploy(shop, alice, to="building")
    page = open_page()
    sign_in(page, live, "alice")
    page.goto(live + "/apps/shop/deployments/1/")
    logs.append_many(d, [("clone", f"cloning object {i}", timezone.now()) for i in range(3)])
    expect(page.locator("#log")).to_contain_text("cloning object 2")
    last = d.log_lines.order_by("-seq").first().seq
    # What the SSE extension does when the server closed the stream for good: a new EventSource.
    url = page.evaluate(
        "() => { const s = htmx.createEventSource('/apps/shop/deployments/1/events/?after=0'); s.close(); return s.url; }"
    )
    assert url.endswith(f"/apps/shop/deployments/1/events/?after={last}")
