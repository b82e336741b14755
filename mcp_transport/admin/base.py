"""The pages' common ModelAdmin: view-only, counts from one query per page, operations on live traffic.

Pages are view-only for everyone (nothing is added, edited or deleted by hand); what an operator
may do is a permission of the model (see the package's docstring).
"""
from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db import models

from .actions import OperationsMixin
from .display import when


class DecoratedChangeList(ChangeList):
    """A changelist whose page of rows gets its counts from one query (`ModelAdmin.decorate`)."""

    def get_results(self, request):
        super().get_results(request)
        self.result_list = self.model_admin.decorate(list(self.result_list))


SHOWN_TO_THE_SECOND = "_to_the_second"


def to_the_second(field):
    """A date-time field shown as `when()` does: Django's DATETIME_FORMAT stops at the minute or
    the hour ("2 p.m."), too coarse to tell what happened in which order."""
    @admin.display(description=field.verbose_name, ordering=field.name)
    def show(obj):
        return when(getattr(obj, field.name))
    return show


class OperatorAdmin(OperationsMixin, admin.ModelAdmin):
    """View-only pages; operations check their own permission (the table in `mcp_transport.admin`).

    The model's date-time fields named in a page's columns, fields or fieldsets are shown to the
    second (`to_the_second`), whatever the project's DATETIME_FORMAT.
    """

    show_full_result_count = False

    def __init__(self, model, admin_site):
        super().__init__(model, admin_site)
        self.datetime_fields = {f.name for f in model._meta.concrete_fields if isinstance(f, models.DateTimeField)}
        for field in model._meta.concrete_fields:
            if field.name in self.datetime_fields:
                setattr(self, field.name + SHOWN_TO_THE_SECOND, to_the_second(field))

    def shown(self, names):
        return [name + SHOWN_TO_THE_SECOND if name in self.datetime_fields else name for name in names]

    def get_list_display(self, request):
        return self.shown(super().get_list_display(request))

    def get_readonly_fields(self, request, obj=None):
        return self.shown(super().get_readonly_fields(request, obj))

    def get_fields(self, request, obj=None):
        return self.shown(super().get_fields(request, obj))

    def get_fieldsets(self, request, obj=None):
        if not self.fieldsets:  # made of get_fields
            return super().get_fieldsets(request, obj)
        return [(title, {**options, "fields": self.shown(options["fields"])}) for title, options in self.fieldsets]

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
