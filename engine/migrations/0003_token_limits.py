from typing import Any

from django.db import migrations, models

PRIORITIES = [(0, "critical"), (1, "high"), (2, "normal"), (3, "low")]


def operators_keep_every_right(apps: Any, schema_editor: Any) -> None:
    # Operator tokens are the farm's own tools: any priority and no cap, as before.
    apps.get_model("engine", "ApiToken").objects.filter(scope="operator").update(max_priority=0, max_active_jobs=None)


class Migration(migrations.Migration):
    """Tokens get a maximum priority and a cap on active jobs. Client tokens get the new
    defaults (normal, 64): before this any client could ask for critical."""

    dependencies = [
        ("engine", "0002_token_scope"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="max_priority",
            field=models.PositiveSmallIntegerField(
                choices=PRIORITIES, default=2,
                help_text="The highest priority this token may ask for; client tokens start at normal."),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="max_active_jobs",
            field=models.PositiveIntegerField(
                blank=True, default=64, null=True,
                help_text="Queued plus running jobs this token may have at once; empty for no cap."),
        ),
        migrations.RunPython(operators_keep_every_right, migrations.RunPython.noop),
    ]
