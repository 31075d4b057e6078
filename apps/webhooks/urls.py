"""URL routes of apps.webhooks: one URL per app; the slash is optional, because providers do not follow redirects."""

from django.urls import path

from apps.webhooks import views

urlpatterns = [
    path("<str:webhook_id>/", views.receive, name="webhook-receive"),
    path("<str:webhook_id>", views.receive),
]
