"""Read-only views of sessions, streams and events (the full operator admin is its own issue)."""
from django.contrib import admin

from .models import Event, Session, Stream


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Session)
class SessionAdmin(ReadOnlyAdmin):
    list_display = ("id", "client_name", "client_version", "protocol_version", "created_at", "last_seen_at",
                    "terminated_at")
    list_filter = ("protocol_version", "server")
    search_fields = ("id", "client_name")


@admin.register(Stream)
class StreamAdmin(ReadOnlyAdmin):
    list_display = ("id", "session", "kind", "method", "tool_name", "status", "last_seq", "reconnects",
                    "created_at")
    list_filter = ("status", "kind")
    list_select_related = ("session",)


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("id", "stream", "seq", "kind", "created_at")
    list_filter = ("kind",)
