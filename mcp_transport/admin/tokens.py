"""Bearer tokens for the MCP endpoint: created here (shown once), revoked here; never edited, never shown again."""
from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html

from ..auth import create_token
from ..models import AccessToken
from .display import badge


class AccessTokenForm(forms.ModelForm):
    expires_in_days = forms.IntegerField(min_value=1, required=False, help_text="Empty: never expires")
    scopes_text = forms.CharField(required=False, label="Scopes", help_text="Space-separated")

    class Meta:
        model = AccessToken
        fields = ["user", "name"]


@admin.register(AccessToken)
class AccessTokenAdmin(admin.ModelAdmin):
    """Bearer tokens: created here (shown once), revoked here; never edited, never shown again."""

    list_display = ("prefix_display", "user", "name", "scopes_display", "state", "created_at", "expires_at",
                    "last_used_at")
    list_filter = ("revoked_at",)
    search_fields = ("prefix", "name", "user__username")
    list_select_related = ("user",)
    readonly_fields = ("prefix", "user", "name", "scopes", "created_at", "expires_at", "revoked_at", "last_used_at")
    actions = ["revoke"]
    form = AccessTokenForm

    @admin.display(description="token", ordering="prefix")
    def prefix_display(self, obj):
        return f"{obj.prefix}…"

    @admin.display(description="scopes")
    def scopes_display(self, obj):
        return " ".join(obj.scopes or [])

    @admin.display(description="state")
    def state(self, obj):
        if obj.revoked_at:
            return badge("failed", "revoked")
        return badge("completed", "usable") if obj.usable else badge("expired", "expired")

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is not None else ()

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["user", "name", "scopes_text", "expires_in_days"]
        return list(self.readonly_fields)

    def has_change_permission(self, request, obj=None):
        return obj is None and super().has_change_permission(request, obj)

    def save_model(self, request, obj, form, change):
        days = form.cleaned_data.get("expires_in_days")
        row, token = create_token(
            form.cleaned_data["user"], name=form.cleaned_data.get("name", ""),
            scopes=(form.cleaned_data.get("scopes_text") or "").split(),
            expires_in=timedelta(days=days) if days else None,
        )
        obj.pk = row.pk
        self.message_user(
            request, format_html("Token created. Copy it now, it is not shown again: <code>{}</code>", token),
            messages.WARNING,
        )

    @admin.action(description="Revoke the selected tokens", permissions=["delete"])
    def revoke(self, request, queryset):
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).")
