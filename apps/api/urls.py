"""URL routes of the REST API, under /api/v1/."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.permissions import AllowAny

from apps.api import schema, views
from apps.deployments.actions import Action

app_name = "api"

urlpatterns = [
    path("apps", views.AppListView.as_view(), name="app-list"),
    path("apps/<str:name>", views.AppDetailView.as_view(), name="app-detail"),
    path("apps/<str:name>/env", views.EnvListView.as_view(), name="env-list"),
    path("apps/<str:name>/env/<str:var>", views.EnvDetailView.as_view(), name="env-detail"),
    path("apps/<str:name>/deployments", views.DeploymentListView.as_view(), name="deployment-list"),
    path("apps/<str:name>/deployments/<int:number>", views.DeploymentDetailView.as_view(), name="deployment-detail"),
    path("apps/<str:name>/deployments/<int:number>/logs", views.DeploymentLogsView.as_view(), name="deployment-logs"),
    path("apps/<str:name>/logs", views.AppLogsView.as_view(), name="app-logs"),
    path("apps/<str:name>/webhook-deliveries", views.WebhookDeliveryListView.as_view(), name="webhook-delivery-list"),
    *[path(f"apps/<str:name>/{action.value}", views.action_view(action), name=f"app-{action.value}") for action in Action],
    path("events", views.EventStreamView.as_view(), name="events"),
    path("schema/", SpectacularAPIView.as_view(custom_settings=schema.SETTINGS, permission_classes=[AllowAny]), name="schema"),
]
