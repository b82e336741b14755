"""Django views a project may route itself."""
from django.http import Http404, HttpResponse
from django.views.decorators.http import require_safe

from . import metrics as _metrics
from . import scrape


@require_safe
def metrics(request):
    """The Prometheus metrics, as `mcp_application(..., metrics=...)` serves them: route it in a
    urls.py to put it behind the project's own protection (`staff_member_required(metrics)`, a
    network rule). 404 while MCP_TRANSPORT["METRICS"] is off."""
    if not _metrics.on:
        raise Http404("Metrics are off (MCP_TRANSPORT METRICS)")
    body, content_type = scrape.exposition(request.headers.get("Accept"))
    response = HttpResponse(body, content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
