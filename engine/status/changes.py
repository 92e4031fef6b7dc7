"""What the records say changed since a reading of the status clocks: the jobs, the jobs whose
partitions moved, and whether any host's row did. Read inside the caller's snapshot, so a
console pass that reads what moved and then the units it moved reads both at one moment."""

from __future__ import annotations

from typing import NamedTuple

from engine.ledger.clock import Reading, written_after
from engine.models import EngineHost, Partition, ProofJob


class Changes(NamedTuple):
    """Stamped after the reading: jobs' rows (by job id), partitions' rows (by their job's id),
    and any host's row."""

    jobs: set[str]
    partitions_of: set[str]
    hosts: bool


def changed_since(since: Reading) -> Changes:
    newer = written_after(since)
    return Changes(jobs=set(ProofJob.objects.filter(newer).values_list("job_id", flat=True)),
                   partitions_of=set(Partition.objects.filter(newer).values_list("job__job_id", flat=True)),
                   hosts=EngineHost.objects.filter(newer).exists())
