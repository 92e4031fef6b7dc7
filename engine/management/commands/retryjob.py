"""retryjob <job_id>...: requeue failed or cancelled jobs, as the admin and the console do.

The same service (engine.ledger.submission.retry) writes the records: unfinished partitions start
again, finished ones are kept. When no engine is running it says so, since the job would wait.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from engine.ledger.submission import retry
from engine.management.commands._common import RecordsCommand, jobs_named, no_engine_hint
from engine.states import JobState


class Command(RecordsCommand):
    help = "Requeue failed or cancelled jobs (the same action as the admin's and the console's)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job_ids", nargs="+", metavar="job_id", help="the jobs to retry")

    def handle(self, *args: Any, **opts: Any) -> None:
        refused: list[str] = []
        retried = 0
        for job in jobs_named(opts["job_ids"], refused):
            if job.state not in (JobState.FAILED, JobState.CANCELLED):
                refused.append(f"{job.job_id} is {job.state} (only failed or cancelled jobs are retried)")
                continue
            retry(job)
            job.refresh_from_db()
            retried += 1
            self.stdout.write(f"requeued {job.job_id} (it is {job.state})")
        hint = no_engine_hint() if retried else None
        if hint:
            self.stderr.write(f"{hint}; requeued jobs wait until then")
        if refused:
            raise CommandError("not retried: " + "; ".join(refused))
