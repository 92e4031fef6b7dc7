
from typing import Any

from django.db import migrations

OPERATOR_GROUP = "operator"  # engine.api.auth.OPERATOR_GROUP, frozen here as migrations must be


def create_operator_group(apps: Any, schema_editor: Any) -> None:
    apps.get_model("auth", "Group").objects.get_or_create(name=OPERATOR_GROUP)


class Migration(migrations.Migration):
    """The console's read-only role exists from the first migrate, so an admin can put people in it
    before anyone opens the console. Unapplying keeps the group: it may hold members by then."""

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("engine", "0003_token_limits"),
    ]

    operations = [
        migrations.RunPython(create_operator_group, migrations.RunPython.noop),
    ]
