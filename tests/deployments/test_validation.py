"""Bad input is refused with a message that says what is wrong and what is allowed."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from apps.deployments import services
from apps.deployments.models import App

pytestmark = pytest.mark.django_db


def errors_of(acme, **fields):
    with pytest.raises(ValidationError) as info:
        services.app_create(team=acme, **fields)
    return info.value.message_dict


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Shop", "lowercase letters, digits and hyphens"),
        ("-shop", "start with a letter"),
        ("shop-", "end with a letter or digit"),
        ("shop_app", "lowercase letters, digits and hyphens"),
        ("9shop", "start with a letter"),
        ("a" * 41, "at most 40 characters; this one has 41"),
        ("admin", "'admin' is reserved"),
        ("", "cannot be blank"),
    ],
)
def test_app_names_must_be_dns_labels_within_the_limit(acme, name, message):
    errors = errors_of(acme, name=name, source="git", repo_url="https://github.com/acme/shop.git")
    assert message in " ".join(errors["name"])
    assert not App.objects.exists()


def test_a_duplicate_app_name_is_refused(acme):
    services.app_create(team=acme, name="shop", source="git", repo_url="https://github.com/acme/shop.git")
    errors = errors_of(acme, name="shop", source="git", repo_url="https://github.com/acme/shop.git")
    assert errors["name"] == ["App with this Name already exists."]


@pytest.mark.parametrize(
    "url", ["file:///srv/repo.git", "/srv/repo.git", "ftp://example.com/r.git", "github.com/acme/shop", "https://"]
)
def test_repository_urls_must_be_http_or_ssh(acme, url):
    errors = errors_of(acme, name="shop", source="git", repo_url=url)
    assert "https:// or ssh git URL" in errors["repo_url"][0]
    assert "file:// and local paths are not allowed" in errors["repo_url"][0]


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/acme/shop.git",
        "http://127.0.0.1:3000/acme/shop.git",
        "git@github.com:acme/shop.git",
        "ssh://git@gitea.example.com:2222/acme/shop.git",
    ],
)
def test_http_and_ssh_repository_urls_are_accepted(acme, url):
    assert services.app_create(team=acme, name="shop", source="git", repo_url=url).repo_url == url


def test_credentials_in_the_repository_url_are_refused(acme):
    errors = errors_of(acme, name="shop", source="git", repo_url="https://bot:hunter22@github.com/acme/shop.git")
    assert errors["repo_url"] == ["Put credentials in the credentials field, not in the repository URL."]


@pytest.mark.parametrize(
    ("image", "tag", "field", "message"),
    [
        ("Nginx", "latest", "image_url", "Not a valid image reference"),
        ("nginx:1.27", "latest", "image_url", "without a tag or digest"),
        ("nginx@sha256:abc", "latest", "image_url", "without a tag or digest"),
        ("docker.io/library/nginx", "-bad", "image_tag", "Not a valid image tag"),
        ("docker.io/library/nginx", "a" * 129, "image_tag", "Not a valid image tag"),
    ],
)
def test_malformed_image_references_are_refused(acme, image, tag, field, message):
    errors = errors_of(acme, name="web", source="image", image_url=image, image_tag=tag)
    assert message in errors[field][0]


def test_an_app_without_its_source_is_refused(acme):
    errors = errors_of(acme, name="web", source="image")
    assert "Constraint “app_has_its_source” is violated." in errors["__all__"]


@pytest.mark.parametrize("name", ["1ABC", "MY-VAR", "my var", "", "A" * 256])
def test_env_var_names_must_be_valid(acme, name):
    app = services.app_create(team=acme, name="shop", source="git", repo_url="https://github.com/acme/shop.git")
    with pytest.raises(ValidationError) as info:
        services.env_var_set(app=app, name=name, value="x")
    assert "letters, digits and underscores" in " ".join(info.value.message_dict["name"]) or "blank" in str(info.value)


def test_branch_names_keep_their_slashes_and_bad_ones_are_refused(acme):
    app = services.app_create(
        team=acme, name="shop", source="git", repo_url="https://github.com/acme/shop.git", branch="feature/login"
    )
    assert app.branch == "feature/login"
    errors = errors_of(acme, name="shop2", source="git", repo_url="https://github.com/acme/shop.git", branch="bad..branch")
    assert "Not a valid git branch name" in errors["branch"][0]
