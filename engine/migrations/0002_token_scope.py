from django.db import migrations, models

SCOPES = [("client", "client: its own jobs"), ("operator", "operator: every job and /status")]


class Migration(migrations.Migration):
    """Tokens get a scope. Tokens issued before saw every job, so they become operator
    tokens (nothing an existing client could do stops working); new tokens are clients."""

    dependencies = [
        ("engine", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="scope",
            field=models.CharField(choices=SCOPES, default="operator", max_length=16),
        ),
        migrations.AlterField(
            model_name="apitoken",
            name="scope",
            field=models.CharField(choices=SCOPES, default="client", max_length=16),
        ),
    ]
