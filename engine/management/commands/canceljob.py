"""canceljob <job_id>...: cancel queued or running jobs, as the admin and the console do.

The same service (engine.ledger.jobs.cancel_job) writes the records; engines drop the job's
partitions within a fraction of a second. A job already finished is left as it is and named.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from engine.ledger.jobs import cancel_job
from engine.management.commands._common import RecordsCommand, jobs_named
from engine.states import JOB_ACTIVE


class Command(RecordsCommand):
    help = "Cancel queued or running jobs (the same action as the admin's and the console's)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job_ids", nargs="+", metavar="job_id", help="the jobs to cancel")

    def handle(self, *args: Any, **opts: Any) -> None:
        refused: list[str] = []
        for job in jobs_named(opts["job_ids"], refused):
            if job.state not in JOB_ACTIVE:
                refused.append(f"{job.job_id} is already {job.state}")
                continue
            cancel_job(job)
            self.stdout.write(f"cancelled {job.job_id}")
        if refused:
            raise CommandError("not cancelled: " + "; ".join(refused))
