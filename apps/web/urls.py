"""URL routes of the web UI."""

from django.contrib.auth import views as auth_views
from django.urls import path

from apps.web import streams, views

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.app_list, name="app-list"),
    path("events/", streams.app_list_events, name="app-list-events"),
    path("new/", views.app_create, name="app-create"),
    path("apps/<str:name>/", views.app_detail, name="app-detail"),
    path("apps/<str:name>/events/", streams.app_events, name="app-events"),
    path("apps/<str:name>/actions/<str:action>/", views.app_action, name="app-action"),
    path("apps/<str:name>/settings/", views.app_settings, name="app-settings"),
    path("apps/<str:name>/env/", views.env_var_set, name="env-var-set"),
    path("apps/<str:name>/env/<str:var>/delete/", views.env_var_delete, name="env-var-delete"),
    path("apps/<str:name>/webhook/rotate/", views.webhook_rotate, name="webhook-rotate"),
    path("apps/<str:name>/delete/", views.app_delete, name="app-delete"),
    path("apps/<str:name>/logs/", views.app_logs, name="app-logs"),
    path("apps/<str:name>/logs/events/", streams.app_log_events, name="app-log-events"),
    path("apps/<str:name>/deployments/<int:number>/", views.deployment_detail, name="deployment-detail"),
    path("apps/<str:name>/deployments/<int:number>/log.txt", views.deployment_log_download, name="deployment-log-download"),
    path("apps/<str:name>/deployments/<int:number>/events/", streams.deployment_log_events, name="deployment-log-events"),
]
