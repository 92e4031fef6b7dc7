"""No stored deadline its reader cannot read: the rows that hold one are clamped to the bounds
first (on PostgreSQL an offset once stored a deadline in the year 10000, which stopped every
engine's claim), then the database refuses any other (engine.moments)."""

import datetime

from django.db import migrations, models

# engine.moments' bounds as they were when this migration was written.
EARLIEST = datetime.datetime(1970, 1, 1, 0, 0, tzinfo=datetime.UTC)
LATEST = datetime.datetime(9000, 1, 1, 0, 0, tzinfo=datetime.UTC)


def clamp_unreadable(apps, schema_editor):
    """UPDATEs only: a row holding such a moment cannot be read into Python, only rewritten."""
    ProofJob = apps.get_model("engine", "ProofJob")
    db = schema_editor.connection.alias
    for column in ("deadline", "latest_start_at"):
        ProofJob.objects.using(db).filter(**{f"{column}__gt": LATEST}).update(**{column: LATEST})
        ProofJob.objects.using(db).filter(**{f"{column}__lt": EARLIEST}).update(**{column: EARLIEST})


class Migration(migrations.Migration):

    dependencies = [
        ('engine', '0020_enginehost_device_reserved'),
    ]

    operations = [
        migrations.RunPython(clamp_unreadable, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='proofjob',
            constraint=models.CheckConstraint(condition=models.Q(('deadline__isnull', True), models.Q(('deadline__gte', EARLIEST), ('deadline__lte', LATEST)), _connector='OR'), name='deadline_readable'),
        ),
        migrations.AddConstraint(
            model_name='proofjob',
            constraint=models.CheckConstraint(condition=models.Q(('latest_start_at__isnull', True), models.Q(('latest_start_at__gte', EARLIEST), ('latest_start_at__lte', LATEST)), _connector='OR'), name='latest_start_readable'),
        ),
    ]
