"""The app's migrations on the test database (SQLite, PostgreSQL, MariaDB)."""
import hashlib

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from mcp_transport.storage import store

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE_HASHES = [("mcp_transport", "0004_unindexed_parents")]
HASHES = [("mcp_transport", "0005_subscription_uri_hash")]


def migrate(targets):
    """Migrate the test database to `targets` (None: the latest) -> the models at that state."""
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def test_subscriptions_stored_before_0005_get_their_uri_hash():
    apps = migrate(BEFORE_HASHES)
    try:
        Session = apps.get_model("mcp_transport", "Session")
        Subscription = apps.get_model("mcp_transport", "Subscription")
        for sid in ("s1", "s2"):
            Session.objects.create(id=sid, protocol_version="2025-11-25")
        uris = ["file:///A", "emoji://\U0001F600", "test://" + "x" * 1990]
        for uri in uris:
            Subscription.objects.create(session_id="s1", uri=uri)
        Subscription.objects.create(session_id="s2", uri="file:///A")

        apps = migrate(HASHES)
        rows = apps.get_model("mcp_transport", "Subscription").objects.values_list("session_id", "uri", "uri_hash")
        assert sorted(rows) == sorted(
            [("s1", uri, hashlib.sha256(uri.encode()).hexdigest()) for uri in uris]
            + [("s2", "file:///A", hashlib.sha256(b"file:///A").hexdigest())]
        )
    finally:
        migrate(None)
    assert sorted(store.subscribed_sessions("default", "file:///A")) == ["s1", "s2"]
    assert store.subscribed_sessions("default", uris[2]) == ["s1"]
    store.subscribe("s2", "file:///a")
    assert store.subscribed_sessions("default", "file:///a") == ["s2"]
