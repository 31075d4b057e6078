"""Image apps against a real OCI registry: Deploy new resolves the tag again at deploy time."""

from __future__ import annotations

import pytest

from apps.deployments import services
from tests.e2e.test_rollouts import behave, settled
from tests.factories import ImageAppFactory
from tests.support.live import unique_name
from tests.support.registry import make_image, push_image, running_registry

pytestmark = [pytest.mark.e2e, pytest.mark.cluster]


@pytest.fixture
def registry():
    with running_registry() as server:
        yield server


def test_deploy_new_picks_up_the_image_pushed_under_the_same_tag(slipway_stack, registry, acme, alice, behaviours):
    app = ImageAppFactory(
        name=unique_name("web"), team=acme, created_by=alice, image_url=f"{registry.host}/web", image_tag="latest", port=8080
    )
    behave(behaviours, app, "healthy")
    first_digest = push_image(registry, "web", "latest", make_image({"app/v": b"1"}))
    first = settled(services.deployment_create(app=app, trigger="manual", actor=alice))
    assert first.status == "live", first.error
    assert first.image == f"{registry.host}/web@{first_digest}"

    second_digest = push_image(registry, "web", "latest", make_image({"app/v": b"2"}))
    assert second_digest != first_digest
    app.refresh_from_db()
    second = settled(services.deployment_deploy_new(app=app, actor=alice))
    assert second.status == "live", second.error
    assert second.image == f"{registry.host}/web@{second_digest}"
    assert f"Resolved {registry.host}/web:latest to {second_digest}." in second.log_lines.values_list("text", flat=True)


def test_an_unknown_tag_fails_before_anything_is_applied(slipway_stack, registry, acme, alice):
    app = ImageAppFactory(
        name=unique_name("web"), team=acme, created_by=alice, image_url=f"{registry.host}/web", image_tag="v404"
    )
    deployment = settled(services.deployment_create(app=app, trigger="manual", actor=alice))
    assert deployment.status == "failed"
    assert "not found" in deployment.error and "web:v404" in deployment.error, deployment.error


def test_a_registry_that_is_down_fails_after_retries_with_a_clear_message(slipway_stack, acme, alice):
    from tests.support.live import free_port

    host = f"127.0.0.1:{free_port()}"
    app = ImageAppFactory(name=unique_name("web"), team=acme, created_by=alice, image_url=f"{host}/web", image_tag="v1")
    deployment = settled(services.deployment_create(app=app, trigger="manual", actor=alice))
    assert deployment.status == "failed"
    assert deployment.error.startswith(f"registry {host} unreachable"), deployment.error
    assert deployment.error.endswith("(gave up after 3 attempts)")
