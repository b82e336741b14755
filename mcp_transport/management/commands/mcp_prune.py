from django.core.management.base import BaseCommand

from mcp_transport.storage import store


class Command(BaseCommand):
    help = (
        "Delete expired and terminated MCP sessions and streams finished more than "
        "EVENT_RETENTION_SECONDS ago (with their events). Run it from cron, e.g. every 10 minutes."
    )

    def handle(self, *args, **options):
        counts = store.prune()
        self.stdout.write(
            f"Pruned {counts['sessions']} session rows and {counts['streams']} stream rows (with events)."
        )
