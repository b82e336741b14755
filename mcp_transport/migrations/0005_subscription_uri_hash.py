"""Subscriptions found by the SHA-256 of their URI: the URI itself, any length, is no longer in a key.

A CharField(2000) was above InnoDB's key length (MySQL, MariaDB), and a case-insensitive collation
(MariaDB's default) matched `file:///A` with `file:///a`; the hash matches exactly everywhere.
"""

import hashlib

from django.db import migrations, models

from ._operations import RemoveConstraintWherePresent, RemoveIndexWherePresent


def fill_uri_hashes(apps, schema_editor):
    """What models.hash_uri computes (written out here: a migration must not change with the code)."""
    Subscription = apps.get_model("mcp_transport", "Subscription")
    rows = Subscription.objects.using(schema_editor.connection.alias).order_by("pk")
    last = 0
    while True:
        batch = list(rows.filter(pk__gt=last).only("pk", "uri")[:1000])
        if not batch:
            return
        for row in batch:
            row.uri_hash = hashlib.sha256(row.uri.encode("utf-8", "surrogatepass")).hexdigest()
        rows.bulk_update(batch, ["uri_hash"])
        last = batch[-1].pk


class Migration(migrations.Migration):

    dependencies = [
        ('mcp_transport', '0004_unindexed_parents'),
    ]

    operations = [
        RemoveConstraintWherePresent(
            model_name='subscription',
            name='mcp_subscription_unique',
        ),
        RemoveIndexWherePresent(
            model_name='subscription',
            name='mcp_subscription_uri',
        ),
        migrations.AlterField(
            model_name='subscription',
            name='uri',
            field=models.TextField(),
        ),
        migrations.AddField(
            model_name='subscription',
            name='uri_hash',
            field=models.CharField(default='', help_text='SHA-256 of the URI (hex), what lookups use', max_length=64),
            preserve_default=False,
        ),
        migrations.RunPython(fill_uri_hashes, migrations.RunPython.noop, elidable=True),
        migrations.AddConstraint(
            model_name='subscription',
            constraint=models.UniqueConstraint(fields=('uri_hash', 'session'), name='mcp_subscription_uri_session'),
        ),
    ]
