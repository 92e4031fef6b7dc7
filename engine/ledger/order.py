"""The claim order: which unclaimed partition is served first, on every host and in every
model of the farm (placement by key ranks within it; the capacity simulator follows it)."""

from __future__ import annotations

from collections.abc import Collection

from django.db.models import F, QuerySet

from engine.models import Partition
from engine.states import JOB_ACTIVE, PartitionState


def claim_order(refused: Collection[str] = ()) -> QuerySet[Partition]:
    """Unclaimed pending partitions of live jobs, none of a circuit in ``refused``, in the order
    they should be served."""
    order = (
        Partition.objects.filter(state=PartitionState.PENDING, host__isnull=True, job__state__in=sorted(JOB_ACTIVE))
        # A priority's jobs by least slack (deadlines.latest_start), those without a deadline after, then by age.
        .order_by("job__priority", F("job__latest_start_at").asc(nulls_last=True), "job__submitted_at", "job_id",
                  "index")
    )
    return order.exclude(job__circuit_id__in=sorted(refused)) if refused else order
