"""Settings for the test suite: the production settings with fixed test keys."""

import os

os.environ.setdefault("SLIPWAY_SECRET_KEY", "test-secret-key-that-is-long-enough-for-django-checks-0123456789")
# A fixed Fernet key, used only by the tests.
os.environ.setdefault("SLIPWAY_ENCRYPTION_KEYS", "UpGmAnkNlDMS5a9KfRx5IlCxbrcH6Yg-K9EronejpZk=")
os.environ.setdefault("SLIPWAY_HTTPS", "false")
os.environ.setdefault("SLIPWAY_STATE_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"), "slipway-test-state"))
os.makedirs(os.environ["SLIPWAY_STATE_DIR"], exist_ok=True)

# Tasks enqueued by one test run never reach another run's worker.
os.environ.setdefault("SLIPWAY_CELERY_QUEUE", f"slipway-test-{os.getpid()}")

from config.settings import *  # noqa: E402,F403

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A file, not memory: the worker, controller and web processes of end-to-end tests share it.
    DATABASES["default"]["TEST"] = {"NAME": str(STATE_DIR / f"test-{os.getpid()}.sqlite3")}  # noqa: F405

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
