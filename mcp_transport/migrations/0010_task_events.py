import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('mcp_transport', '0009_elicitations'),
    ]

    operations = [
        migrations.CreateModel(
            name='TaskEvent',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('kind', models.CharField(choices=[('message', 'Message'), ('question', 'Question'), ('status', 'Status')], default='message', max_length=8)),
                ('payload', models.TextField(help_text='JSON: the message as sent, the questions asked, or the new status')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('task', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='mcp_transport.task')),
            ],
            options={
                'indexes': [models.Index(fields=['task', 'id'], name='mcp_taskevent_task')],
            },
        ),
    ]
