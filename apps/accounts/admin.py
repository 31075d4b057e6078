from django.contrib import admin

from apps.accounts.models import ApiToken, Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username", "prefix"]
    # The hash is useless to a person and the raw token is never stored.
    exclude = ["hashed"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False  # tokens are created in the UI or with `manage.py create_api_token`, which show the raw value once
