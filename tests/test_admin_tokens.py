"""Bearer tokens in the admin: created (shown once), listed without the secret, revoked."""
import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from mcp_transport.auth import hash_token
from mcp_transport.models import AccessToken

pytestmark = pytest.mark.django_db


def test_create_shows_the_token_once_and_stores_only_its_hash(admin_client):
    frank = User.objects.create_user("frank")
    response = admin_client.post(
        reverse("admin:mcp_transport_accesstoken_add"),
        {"user": frank.pk, "name": "ci", "scopes_text": "mcp read", "expires_in_days": "30"},
        follow=True,
    )
    assert response.status_code == 200
    token = re.search(r"<code>(mcp_[^<]+)</code>", response.content.decode()).group(1)
    row = AccessToken.objects.get()
    assert row.user == frank and row.scopes == ["mcp", "read"] and row.expires_at is not None
    assert row.token_hash == hash_token(token) and token not in row.token_hash
    listing = admin_client.get(reverse("admin:mcp_transport_accesstoken_changelist")).content.decode()
    assert row.prefix in listing and token not in listing
    detail = admin_client.get(reverse("admin:mcp_transport_accesstoken_change", args=[row.pk])).content.decode()
    assert token not in detail and 'name="name"' not in detail


def test_revoke_action(admin_client):
    from mcp_transport.auth import create_token

    row, _ = create_token(User.objects.create_user("gina"))
    admin_client.post(reverse("admin:mcp_transport_accesstoken_changelist"),
                      {"action": "revoke", "_selected_action": [row.pk]})
    row.refresh_from_db()
    assert row.revoked_at is not None and not row.usable
