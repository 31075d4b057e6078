"""The Celery application; tasks are found in each Django app's tasks.py."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("slipway")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Heartbeat for the worker's liveness probe (config/liveness.py). Added by name so that
# importing the Celery app does not import the probe module.
app.steps["consumer"].add("config.liveness:WorkerHeartbeat")
