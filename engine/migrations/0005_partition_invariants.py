"""The database keeps the status truth: a partition in ``gpu`` has a worker, and no worker has
two (and rows are indexed by version, for the console's "what changed since" reads). Rows that break either rule (written before the rule existed) go back to the queue first;
their attempt stays, so a late write from the old claim is still fenced off."""

from typing import Any

from django.db import migrations, models


def requeue_contradictions(apps: Any, schema_editor: Any) -> None:
    Partition = apps.get_model("engine", "Partition")
    back = dict(state="pending", host=None, worker=None, lease_expires_at=None, reserved_bytes=0)
    Partition.objects.filter(state="gpu", worker__isnull=True).update(**back)
    seen: set[int] = set()
    for part in Partition.objects.filter(state="gpu").order_by("worker_id", "gpu_started_at", "pk"):
        if part.worker_id in seen:
            Partition.objects.filter(pk=part.pk).update(**back)
        seen.add(part.worker_id)


class Migration(migrations.Migration):

    dependencies = [
        ("engine", "0004_operator_group"),
    ]

    operations = [
        migrations.RunPython(requeue_contradictions, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="partition",
            constraint=models.CheckConstraint(
                condition=~models.Q(state="gpu") | models.Q(worker__isnull=False), name="gpu_partition_has_worker"),
        ),
        migrations.AddIndex(model_name="proofjob", index=models.Index(fields=["version"], name="job_version")),
        migrations.AddIndex(model_name="partition", index=models.Index(fields=["version"], name="part_version")),
        migrations.AddConstraint(
            model_name="partition",
            constraint=models.UniqueConstraint(
                fields=["worker"], condition=models.Q(state="gpu"), name="one_gpu_partition_per_worker"),
        ),
    ]
