"""Settings for the test suite: the production settings with fixed test keys."""

import os

os.environ.setdefault("SLIPWAY_SECRET_KEY", "test-secret-key-that-is-long-enough-for-django-checks-0123456789")
# A fixed Fernet key, used only by the tests.
os.environ.setdefault("SLIPWAY_ENCRYPTION_KEYS", "UpGmAnkNlDMS5a9KfRx5IlCxbrcH6Yg-K9EronejpZk=")
os.environ.setdefault("SLIPWAY_HTTPS", "false")
os.environ.setdefault("SLIPWAY_STATE_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"), "slipway-test-state"))

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
