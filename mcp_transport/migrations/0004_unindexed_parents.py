"""Drop the indexes on Stream.session and Event.stream: each is the prefix of another index."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('mcp_transport', '0003_deliveries'),
    ]

    operations = [
        migrations.AlterField(
            model_name='event',
            name='stream',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='mcp_transport.stream'),
        ),
        migrations.AlterField(
            model_name='stream',
            name='session',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='streams', to='mcp_transport.session'),
        ),
    ]
