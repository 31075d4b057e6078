"""The test cast: alice owns the acme team's apps, bob is a member, charlie is an outsider, olivia is staff."""

from __future__ import annotations

import pytest

from tests.factories import AppFactory, MembershipFactory, TeamFactory, UserFactory

# The local cluster (kube_cluster, kube_namespace, behaviours) and the end-to-end stack (slipway_stack).
pytest_plugins = ["kubesim.pytest_plugin", "tests.support.live"]


@pytest.fixture
def acme(db):
    return TeamFactory(name="acme")


@pytest.fixture
def alice(acme):
    user = UserFactory(username="alice")
    MembershipFactory(team=acme, user=user, role="owner")
    return user


@pytest.fixture
def bob(acme):
    user = UserFactory(username="bob")
    MembershipFactory(team=acme, user=user, role="member")
    return user


@pytest.fixture
def charlie(db):
    user = UserFactory(username="charlie")
    MembershipFactory(team=TeamFactory(name="globex"), user=user, role="owner")
    return user


@pytest.fixture
def olivia(db):
    """An operator: staff, in no team."""
    return UserFactory(username="olivia", is_staff=True, is_superuser=True)


@pytest.fixture
def shop(acme, alice):
    """alice's git app."""
    return AppFactory(name="shop", team=acme, created_by=alice)
