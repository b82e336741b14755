"""How a page runs an operation on live traffic (`mcp_transport.operations`): the permission check, a
confirmation page first, the outcome reported to the operator and recorded in the object's history."""
from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse

from .. import operations


class OperationsMixin:
    """For a ModelAdmin: `object_operation_view` (`<id>/<operation>/` URLs) and `confirmed_action`
    (changelist actions). Each operation checks its own permission."""

    def check_operation(self, request, permission: str):
        if not request.user.has_perm(permission):
            raise PermissionDenied

    def report(self, request, outcome: operations.Outcome, obj=None):
        self.message_user(request, outcome.message, messages.SUCCESS if outcome.done else messages.WARNING)
        if outcome.done and obj is not None:
            self.log_change(request, obj, outcome.message)

    def run_operation(self, request, objects, operation):
        for obj in objects:
            self.report(request, operation(obj), obj)

    def confirm_page(self, request, *, title, question, objects, action=None, submit, danger=True):
        """An intermediate page: POSTs back with `confirm=yes` (to the action or to this URL)."""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "media": self.media,
            "title": title,
            "question": question,
            "objects": objects,
            "action": action,
            "submit": submit,
            "danger": danger,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/mcp_transport/confirm.html", context)

    def object_operation_view(self, request, object_id, *, permission, operation, title, question, submit,
                              applies=lambda obj: True, danger=True):
        """`<id>/<operation>/`: GET asks for confirmation, POST does it, then back to the object's page."""
        self.check_operation(request, permission)
        obj = get_object_or_404(self.get_queryset(request), pk=object_id)
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        back = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[obj.pk],
                       current_app=self.admin_site.name)
        if request.method == "POST":
            self.run_operation(request, [obj], operation)
            return HttpResponseRedirect(back)
        if not applies(obj):
            self.message_user(request, f"Nothing to do: {title.lower()} does not apply to {obj}.", messages.WARNING)
            return HttpResponseRedirect(back)
        return self.confirm_page(request, title=title, question=question, objects=[obj], submit=submit,
                                 danger=danger)

    def confirmed_action(self, request, queryset, *, operation, title, question, submit, danger=True):
        """A changelist action with a confirmation page first."""
        if request.POST.get("confirm") == "yes":
            self.run_operation(request, list(queryset), operation)
            return None
        return self.confirm_page(request, title=title, question=question, objects=list(queryset[:200]),
                                 action=request.POST.get("action"), submit=submit, danger=danger)
