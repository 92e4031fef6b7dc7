"""jobs: list jobs with their state and progress, newest first (--state, --kind, --limit).

When jobs are queued or running and no engine is alive (read from the hosts' heartbeats), a
last line says so and how to start one: otherwise "queued" reads as "soon".
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db.models import Count, Q

from engine.management.commands._common import RecordsCommand, no_engine_hint
from engine.models import ProofJob
from engine.states import JOB_ACTIVE, JobState, PartitionState, Priority, ProofKind


class Command(RecordsCommand):
    help = "List proof jobs: id, kind, state, partitions done, priority, submitted."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--state", choices=JobState.values, help="only jobs in this state")
        parser.add_argument("--kind", choices=ProofKind.values, help="only jobs of this kind")
        parser.add_argument("--limit", type=int, default=50, help="how many (default 50)")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["limit"] < 1:
            raise CommandError("--limit must be at least 1")
        jobs = ProofJob.objects.all()
        if opts["state"]:
            jobs = jobs.filter(state=opts["state"])
        if opts["kind"]:
            jobs = jobs.filter(kind=opts["kind"])
        rows = list(jobs.order_by("-submitted_at", "-pk")
                    .annotate(n_done=Count("partitions", filter=Q(partitions__state=PartitionState.DONE)))
                    [:opts["limit"]])
        if not rows:
            self.stdout.write("no jobs")
            return
        # Job ids are shown whole: a cut id ("ps-snap-") tells an operator nothing.
        width = max(len("JOB ID"), *(len(j.job_id) for j in rows))
        self.stdout.write(f"{'JOB ID':<{width}}  {'KIND':<12}  {'STATE':<9}  {'DONE':>7}  {'PRIORITY':<8}  SUBMITTED")
        for j in rows:
            done = f"{j.n_done}/{j.num_partitions}"
            self.stdout.write(f"{j.job_id:<{width}}  {j.kind:<12}  {j.state:<9}  {done:>7}  "
                              f"{Priority(j.priority).label:<8}  {j.submitted_at:%Y-%m-%d %H:%M:%S}")
        waiting = ProofJob.objects.filter(state__in=JOB_ACTIVE).count()
        hint = no_engine_hint() if waiting else None
        if hint:
            self.stderr.write(f"{waiting} job(s) queued or running, but {hint}")
