from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from mcp_transport.auth import create_token
from mcp_transport.models import AccessToken


class Command(BaseCommand):
    help = "Create, list and revoke bearer tokens for the MCP endpoint (mcp_transport.auth.BearerTokenBackend)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a token; it is printed once and stored hashed.")
        create.add_argument("username")
        create.add_argument("--name", default="")
        create.add_argument("--scopes", default="", help="Space-separated scopes")
        create.add_argument("--expires-days", type=float, default=None)
        listing = sub.add_parser("list", help="List tokens (never the tokens themselves).")
        listing.add_argument("--user", default=None)
        revoke = sub.add_parser("revoke", help="Revoke a token by its prefix (as `list` shows it).")
        revoke.add_argument("prefix")

    def handle(self, *args, action, **options):
        getattr(self, f"do_{action}")(**options)

    def do_create(self, username, name, scopes, expires_days, **_):
        User = get_user_model()
        try:
            user = User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist:
            raise CommandError(f"No user {username!r}") from None
        expires = timedelta(days=expires_days) if expires_days else None
        row, token = create_token(user, name=name, scopes=scopes.split(), expires_in=expires)
        self.stderr.write(f"Token {row.prefix}… for {username} (shown once, store it now):")
        self.stdout.write(token)

    def do_list(self, user, **_):
        rows = AccessToken.objects.select_related("user")
        if user:
            rows = rows.filter(**{f"user__{get_user_model().USERNAME_FIELD}": user})
        for row in rows:
            state = "usable" if row.usable else ("revoked" if row.revoked_at else "expired")
            expires = row.expires_at.isoformat(timespec="minutes") if row.expires_at else "never"
            scopes = " ".join(row.scopes)
            self.stdout.write(f"{row.prefix}  {row.user}  {state}  expires {expires}  {scopes}  {row.name}")

    def do_revoke(self, prefix, **_):
        count = AccessToken.objects.filter(prefix=prefix, revoked_at__isnull=True).update(revoked_at=timezone.now())
        if not count:
            raise CommandError(f"No usable token with prefix {prefix!r}")
        self.stdout.write(f"Revoked {count} token(s).")
