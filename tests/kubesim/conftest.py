"""Fixtures for the kubesim proof tests (the root conftest may register the same plugin)."""

from kubesim.pytest_plugin import *  # noqa: F401,F403
