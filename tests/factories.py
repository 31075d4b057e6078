"""Factories for the test cast and their apps."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from apps.accounts.models import Membership, Team
from apps.deployments.models import App, Deployment


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("correct horse battery staple")


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    name = factory.Sequence(lambda n: f"team-{n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    team = factory.SubFactory(TeamFactory)
    user = factory.SubFactory(UserFactory)
    role = Membership.Role.MEMBER


class AppFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = App

    name = factory.Sequence(lambda n: f"app-{n}")
    team = factory.SubFactory(TeamFactory)
    source = App.Source.GIT
    repo_url = "https://github.com/acme/shop.git"
    branch = "main"


class ImageAppFactory(AppFactory):
    source = App.Source.IMAGE
    repo_url = ""
    image_url = "127.0.0.1:5000/shop"
    image_tag = "latest"


class DeploymentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Deployment

    app = factory.SubFactory(AppFactory)
    number = factory.Sequence(lambda n: n + 1)
    trigger = Deployment.Trigger.MANUAL
    commit_sha = "3f2a9c1d0e5b7a8c9d0e1f2a3b4c5d6e7f8a9b0c"
