"""A deployment's page: header, error above the log, step markers, live stream only while in flight, download."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.web.conftest import deploy, log

pytestmark = pytest.mark.django_db


def page(client, number=1) -> str:
    response = client.get(reverse("deployment-detail", args=["shop", number]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_log_marks_where_each_step_starts(as_alice, shop, alice):
    d = deploy(shop, alice, to="building")
    log(d, "clone", "Cloning into /workspace", "HEAD is now at 3f2a9c1")
    log(d, "plan", "Detected Python")
    log(d, "build", "#5 RUN pip install")
    body = page(as_alice)
    markers = [step for step in ("clone", "plan", "build") if f'data-step="{step}"' in body]
    assert markers == ["clone", "plan", "build"]
    assert body.index('data-step="clone"') < body.index("Cloning into /workspace") < body.index('data-step="plan"')
    assert body.count('data-step="clone"') == 1


def test_a_failed_deployment_shows_its_error_above_the_log(as_alice, shop, alice):
    d = deploy(shop, alice, to="failed", error="build failed at step push: registry refused the image (401)")
    log(d, "push", "pushing 127.0.0.1:5000/shop")
    body = page(as_alice)
    assert "build failed at step push: registry refused the image (401)" in body
    assert body.index("registry refused the image") < body.index('id="log"')


def test_an_in_flight_deployment_streams_its_log_from_the_last_line_shown(as_alice, shop, alice):
    d = deploy(shop, alice, to="building")
    log(d, "clone", "one", "two")
    last = d.log_lines.order_by("-seq").first().seq
    body = page(as_alice)
    assert f'sse-connect="{reverse("deployment-log-events", args=["shop", 1])}?after={last}"' in body
    assert 'sse-close="end"' in body


def test_a_settled_deployment_does_not_open_a_stream(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    assert "sse-connect" not in page(as_alice)


def test_the_header_shows_trigger_commit_image_and_phases(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    body = page(as_alice)
    assert "Manual by alice" in body and "3f2a9c1" in body and "Fix the checkout total" in body
    assert "127.0.0.1:5000/shop@sha256:aaaaaaaaaaaa" in body
    assert "pending" in body and "building" in body and "deploying" in body


def test_the_log_downloads_as_text(as_alice, shop, alice):
    d = deploy(shop, alice, to="building")
    log(d, "clone", "Cloning into /workspace")
    response = as_alice.get(reverse("deployment-log-download", args=["shop", 1]))
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="shop-1.log"'
    lines = response.content.decode().splitlines()
    assert lines[0].endswith("[system] Deployment #1 created by alice (manual).")
    assert lines[-1].endswith("[clone] Cloning into /workspace")


def test_a_deployment_that_does_not_exist_is_404(as_alice, shop):
    assert as_alice.get(reverse("deployment-detail", args=["shop", 9])).status_code == 404
    assert as_alice.get(reverse("deployment-log-download", args=["shop", 9])).status_code == 404


def test_another_apps_deployment_number_is_not_reachable_through_this_app(as_alice, shop, alice, acme):
    from tests.factories import AppFactory

    other = AppFactory(name="blog", team=acme)
    deploy(other, alice, to="building")
    assert as_alice.get(reverse("deployment-detail", args=["shop", 1])).status_code == 404


def test_the_app_logs_page_says_when_the_app_is_not_live(as_alice, shop, alice):
    deploy(shop, alice, to="building")
    body = as_alice.get(reverse("app-logs", args=["shop"])).content.decode()
    assert "The app is not live" in body and "sse-connect" not in body


def test_the_app_logs_page_follows_the_pods_while_live(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    body = as_alice.get(reverse("app-logs", args=["shop"])).content.decode()
    assert f'sse-connect="{reverse("app-log-events", args=["shop"])}"' in body
