from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class MCPTransportConfig(AppConfig):
    name = "mcp_transport"
    verbose_name = "MCP transport"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import checks  # noqa: F401  (registers the system checks)
        from . import metrics, scrape, tracing
        from .execution.worker import worker
        from .protocol.server import set_notifier

        set_notifier(worker)
        metrics.configure()
        tracing.configure()
        scrape.install()

        autodiscover_modules("mcp")
