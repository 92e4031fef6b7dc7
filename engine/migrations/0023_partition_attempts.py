# Each attempt kept (issue 47): a partition's requeue moment and its ended attempts, a job's latest retry.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('engine', '0022_api_token_names'),
    ]

    operations = [
        migrations.AddField(
            model_name='partition',
            name='attempts',
            field=models.JSONField(blank=True, default=list, help_text="Each ended attempt's recorded moments, how it ended and why, oldest first (engine.ledger.claims.release_claim); the row's own are the current attempt's."),
        ),
        migrations.AddField(
            model_name='partition',
            name='requeued_at',
            field=models.DateTimeField(blank=True, help_text="When its current attempt was queued again (a failure retried, a lapsed lease, a hand-back, an operator's retry). Empty: queued since its job's submission.", null=True),
        ),
        migrations.AddField(
            model_name='proofjob',
            name='retried_at',
            field=models.DateTimeField(blank=True, help_text="An operator's latest retry: its queue counts from then. Empty: never.", null=True),
        ),
        migrations.AlterField(
            model_name='proofjob',
            name='started_at',
            field=models.DateTimeField(blank=True, help_text='Its first claim (since its latest retry).', null=True),
        ),
    ]
