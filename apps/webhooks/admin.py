from django.contrib import admin

from apps.webhooks.models import WebhookDelivery


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = [
        "received_at",
        "app",
        "provider",
        "event",
        "delivery_id",
        "signature",
        "outcome",
        "reason",
        "status_code",
        "deployment",
    ]
    list_select_related = ["app", "deployment__app"]
    list_filter = ["provider", "outcome", "signature"]
    search_fields = ["app__name", "delivery_id", "reason"]
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False
