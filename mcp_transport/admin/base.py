"""The pages' common ModelAdmin: view-only, counts from one query per page, operations on live traffic.

Pages are view-only for everyone (nothing is added, edited or deleted by hand); what an operator
may do is a permission of the model (see the package's docstring).
"""
from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList

from .actions import OperationsMixin


class DecoratedChangeList(ChangeList):
    """A changelist whose page of rows gets its counts from one query (`ModelAdmin.decorate`)."""

    def get_results(self, request):
        super().get_results(request)
        self.result_list = self.model_admin.decorate(list(self.result_list))


class OperatorAdmin(OperationsMixin, admin.ModelAdmin):
    """View-only pages; operations check their own permission (the table in `mcp_transport.admin`)."""

    show_full_result_count = False

    class Media:
        css = {"all": ("mcp_transport/admin.css",)}

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def decorate(self, rows):
        return rows

    def get_changelist(self, request, **kwargs):
        return DecoratedChangeList
