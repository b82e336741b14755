from django.core.management.base import BaseCommand

from mcp_transport import operations


class Command(BaseCommand):
    help = (
        "Delete expired and terminated MCP sessions, streams finished more than EVENT_RETENTION_SECONDS ago "
        "(with their events), the 2026-07-28 requests of workers that are gone, tasks past their TTL (with "
        "their events) and 2026-07-28 requests' URL elicitations older than SESSION_IDLE_TIMEOUT. Run it from cron, "
        "e.g. every 10 minutes."
    )

    def handle(self, *args, **options):
        self.stdout.write(operations.prune().message)
