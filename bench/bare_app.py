"""A bare Django view with Slipway's settings and middleware, served next to the webhook in bench/webhooks.py.

``application`` is the WSGI app and ``asgi_application`` the ASGI one; both answer
``POST /bare/`` with a two-byte body and nothing else, so the difference to the webhook
is the webhook's own work.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402
from django.conf import settings  # noqa: E402

django.setup()
# This module is the URLconf: the same settings and middleware, one view.
settings.ROOT_URLCONF = __name__

from django.core.asgi import get_asgi_application  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import HttpRequest, HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402


@csrf_exempt
def bare(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [path("bare/", bare), path("healthz", bare)]

application = get_wsgi_application()
asgi_application = get_asgi_application()
