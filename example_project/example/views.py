"""The page a URL-mode elicitation sends the user to (tools connect_account, open_settings_page).

A real project checks here that the browser's user is the one the elicitation is bound to (the
`Elicitation` row's principal) before it takes anything; the example serves anonymous clients.
"""
from django.http import HttpResponse
from django.template import engines
from django.views.decorators.http import require_http_methods

from mcp_transport.operations import complete_elicitation

PAGE = engines["django"].from_string(
    "<!doctype html><title>Connect</title><p>{{ message }}</p>"
    "{% if ask %}<form method=post>{% csrf_token %}<button>Done</button></form>{% endif %}")


@require_http_methods(["GET", "POST"])
def connect(request, elicitation_id: str):
    if request.method == "GET":
        return HttpResponse(PAGE.render({"message": "Press Done when you are ready.", "ask": True}, request))
    if complete_elicitation(elicitation_id):
        return HttpResponse(PAGE.render({"message": "Done: you can go back to your MCP client."}, request))
    return HttpResponse(PAGE.render({"message": "Nothing waits for this page."}, request), status=404)
