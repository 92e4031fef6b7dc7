"""What ``GET /api/v1/events`` sends, read from the records: a client's jobs as events, each
with an id that names the snapshot it was read in, so a client that reconnects with
``Last-Event-ID`` is sent every job of its own that changed since, at its state now.

An event's id is ``<version>.<n>.<at>.<reading>``: the farm's version (the sum of every
writer's status clock) when it was read, its place among the events sent at that version, the
moment of the read (epoch ms), and the clocks themselves (engine.ledger.clock.Reading), which
say exactly which commits it had seen. A stream's ids rise strictly: by version, then by place.

A replay sends each job of the client that any clock stamped after the reading, or that was
submitted since (a submission is not stamped; one committed just after the read may carry an
earlier time, so SUBMITTED_MARGIN_S before it counts too, and such a job may be sent twice, at
its state now). It is bounded: jobs whose last change is at most REPLAY_RETENTION_S old,
REPLAY_MAX of them at most (the most recently changed); a client away longer lists its jobs
with ``GET /jobs``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from django.db.models import Count, Exists, F, OuterRef, Q
from django.utils import timezone

from engine.ledger.clock import Reading, written_after
from engine.models import ApiToken, Partition, ProofJob
from engine.states import JOB_ACTIVE, PartitionState
from engine.status.read import one_snapshot
from engine.status.records import clocks

REPLAY_RETENTION_S = 3600.0
REPLAY_MAX = 1000
SUBMITTED_MARGIN_S = 5.0


class JobEvent(NamedTuple):
    """One job as an event carries it."""

    job_id: str
    state: str
    partitions_done: int
    num_partitions: int

    def data(self) -> dict[str, Any]:
        return self._asdict()


@dataclass(frozen=True)
class EventId:
    version: int
    place: int
    at_ms: int  # when it was read
    reading: Reading

    def __str__(self) -> str:
        clocks_read = "_".join(f"{clock}-{value}" for clock, value in sorted(self.reading.values.items()))
        return f"{self.version}.{self.place}.{self.at_ms}.{clocks_read}"

    @property
    def at(self) -> datetime:
        return datetime.fromtimestamp(self.at_ms / 1000, tz=UTC)

    @classmethod
    def parse(cls, text: str) -> EventId | None:
        """An id this stream sent, or None for anything else (a client's own, a truncated one)."""
        try:
            version, place, at_ms, clocks_read = text.strip().split(".", 3)
            values = {}
            for pair in filter(None, clocks_read.split("_")):
                clock, value = pair.split("-")
                values[int(clock)] = int(value)
            reading = Reading(values)
            if reading.version != int(version) or int(place) < 0 or int(at_ms) < 0:
                return None
            return cls(int(version), int(place), int(at_ms), reading)
        except ValueError:
            return None

    def after(self, other: EventId | None) -> EventId:
        """This read's next id after ``other`` (the last sent): a later version starts its places
        at 0; the same version continues after it, so a stream's ids never repeat."""
        if other is None or self.version > other.version:
            return self
        return EventId(other.version, other.place + 1, other.at_ms, other.reading)


class JobEvents(NamedTuple):
    reading: Reading
    at: datetime  # when it was read
    events: list[JobEvent]

    def first_id(self) -> EventId:
        return EventId(self.reading.version, 0, int(self.at.timestamp() * 1000), self.reading)


def _with_progress(jobs: Any) -> list[JobEvent]:
    return [JobEvent._make(row) for row in jobs.annotate(
        done=Count("partitions", filter=Q(partitions__state=PartitionState.DONE)))
        .order_by("job_id").values_list("job_id", "state", "done", "num_partitions")]


def job_events(owner: ApiToken | None, *, job_ids: Collection[str] | None = None, since: EventId | None = None
               ) -> JobEvents:
    """In one snapshot, with its clocks: the jobs ``owner`` submitted (every job for None)
    named by ``job_ids``; else those changed after the read of ``since`` within the replay's
    bounds; else the active ones (a stream's first frame)."""
    with one_snapshot():
        reading, now = clocks(), timezone.now()
        jobs = ProofJob.objects.all() if owner is None else ProofJob.objects.filter(client=owner)
        if job_ids is not None:
            jobs = jobs.filter(job_id__in=list(job_ids))
        elif since is not None:
            newer = written_after(since.reading) & Q(version__gt=0)  # stamped after it (an unstamped row: never)
            moved = Partition.objects.filter(newer, job=OuterRef("pk"))
            submitted = Q(submitted_at__gte=since.at - timedelta(seconds=SUBMITTED_MARGIN_S))
            cutoff = now - timedelta(seconds=REPLAY_RETENTION_S)
            changed = (jobs.filter(newer | submitted | Q(Exists(moved)))
                       .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=cutoff)))
            latest = changed.order_by(F("finished_at").desc(nulls_first=True), "-pk").values_list("pk", flat=True)[:REPLAY_MAX]
            jobs = ProofJob.objects.filter(pk__in=list(latest))
        else:
            jobs = jobs.filter(state__in=JOB_ACTIVE)
        return JobEvents(reading, now, _with_progress(jobs))
