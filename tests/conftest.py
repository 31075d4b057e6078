"""The test cast: alice owns the acme team's apps, bob is a member, charlie is an outsider, olivia is staff."""

from __future__ import annotations

import pytest

from tests.factories import AppFactory, MembershipFactory, TeamFactory, UserFactory

# The local cluster (kube_cluster, kube_namespace, behaviours) and the end-to-end stack (slipway_stack).
pytest_plugins = ["kubesim.pytest_plugin", "tests.support.live"]


def pytest_collection_modifyitems(config, items):
    """Run the end-to-end tests last: once the stack's worker and controller run, they act on
    whatever a test writes to the shared test database, so no other test may run beside them."""
    items.sort(key=lambda item: "slipway_stack" in getattr(item, "fixturenames", ()))


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
