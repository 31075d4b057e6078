"""URL routes: the web UI, the REST API, webhooks, admin and health endpoints."""

from django.contrib import admin
from django.urls import include, path

from apps.core import views as core_views

urlpatterns = [
    path("healthz", core_views.healthz, name="healthz"),
    path("readyz", core_views.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("webhooks/", include("apps.webhooks.urls")),
    path("api/v1/", include("apps.api.urls")),
    path("", include("apps.web.urls")),
]
