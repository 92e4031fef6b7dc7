"""submitjob <kind> <job_id>: submit a proof request straight into the records.

Inputs come from --inputs file.json or from flags (--sector-seed, --randomness, --data-seed,
--partitions). With --wait it follows the job (a bar of partitions done) and, once done,
writes the proof under DATA_DIR/proofs/ and prints the path; --out PATH waits the same way
and writes it to PATH instead (--format bytes: the compressed A‖B‖C encoding the API serves
at /proof?format=bytes). When no engine is running it says so, since the job would wait
forever. The same rules as the REST API apply (engine.ledger.submission), so the two never
disagree about what is valid.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from engine.api.job_out import proof_document
from engine.ledger import submission
from engine.management.commands._common import RecordsCommand, live_hosts, no_engine_hint
from engine.models import ProofJob
from engine.moments import window_text
from engine.states import JobState, PartitionState

BAR_WIDTH = 30


def proof_path(job: ProofJob) -> Path:
    return Path(settings.DATA_DIR) / "proofs" / f"{job.job_id}.json"


def proof_content(job: ProofJob, fmt: str) -> bytes:
    if fmt == "bytes":
        from engine.api.proof_bytes import job_proof_bytes

        return job_proof_bytes([p.proof for p in job.partitions.order_by("index")])
    return (json.dumps(proof_document(job), indent=1) + "\n").encode()


def write_proof(job: ProofJob, path: Path | None = None, fmt: str = "json") -> Path:
    path = proof_path(job) if path is None else path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp")
    tmp.write_bytes(proof_content(job, fmt))
    tmp.replace(path)  # a reader never sees half a proof
    return path


# The inputs a flag sets, named as the flag: the command's user never typed "inputs.sector_seed".
_FLAGS = {f"inputs.{name}": f"--{name.replace('_', '-')}" for name in ("sector_seed", "randomness", "data_seed",
                                                                          "partitions")}


def _flag(field: str) -> str:
    return _FLAGS.get(field, field)


class Command(RecordsCommand):
    help = "Submit a proof request (winning-post, window-post, porep-c2, snap-update)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", help="winning-post, window-post, porep-c2 or snap-update")
        parser.add_argument("job_id", help="your id for the request (resubmitting the same request is safe)")
        parser.add_argument("--inputs", type=Path, help="a JSON file with the inputs")
        parser.add_argument("--sector-seed", help="64 hex digits")
        parser.add_argument("--randomness", help="64 hex digits")
        parser.add_argument("--data-seed", help="64 hex digits (snap-update)")
        parser.add_argument("--partitions", type=int, help="partitions (window-post)")
        parser.add_argument("--priority", help="critical, high, normal, low or 0..3")
        parser.add_argument("--deadline", help=f"when the proof is worthless: ISO 8601, e.g. 2026-12-05T12:00:00Z, "
                                               f"{window_text()} (default: the kind's PROVINGSITE_DEADLINES "
                                               "offset, if any)")
        parser.add_argument("--wait", action="store_true", help="follow the job and write its proof when done")
        parser.add_argument("--out", type=Path, metavar="PATH",
                            help="follow the job and write its proof to PATH when done (implies --wait)")
        parser.add_argument("--format", choices=("json", "bytes"), default="json",
                            help="what --out/--wait write: json (our document) or bytes (compressed A‖B‖C)")
        parser.add_argument("--timeout", type=float, default=0, help="with --wait: give up after this many seconds")

    def _inputs(self, opts: dict[str, Any]) -> dict[str, Any]:
        inputs: dict[str, Any] = {}
        if opts["inputs"]:
            try:
                inputs = json.loads(opts["inputs"].read_text())
            except (OSError, ValueError) as exc:
                raise CommandError(f"--inputs: cannot read {opts['inputs']}: {exc}") from None
            if not isinstance(inputs, dict):
                raise CommandError("--inputs: the file must hold a JSON object")
        for flag in ("sector_seed", "randomness", "data_seed", "partitions"):
            if opts[flag] is not None:
                inputs[flag] = opts[flag]
        return inputs

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            job, created = submission.submit(submission.builtin(opts["kind"], opts["job_id"], self._inputs(opts),
                                                                opts["priority"], settings.PROVINGSITE["SCALE"],
                                                                opts["deadline"]))
        except submission.SubmissionRefused as exc:
            raise CommandError(f"{_flag(exc.field)}: {exc.message}" if exc.field else exc.message) from None
        except submission.JobConflict as exc:
            raise CommandError(f"job_id: {exc}") from None
        self.stdout.write(f"{'submitted' if created else 'already submitted'}: {job.kind} {job.job_id} "
                          f"({job.num_partitions} partition(s), state {job.state})")
        hint = no_engine_hint() if job.state not in (JobState.DONE, JobState.FAILED, JobState.CANCELLED) else None
        if hint:
            self.stderr.write(f"{hint}; the job waits in the queue until then")
        if opts["wait"] or opts["out"]:
            self._wait(job, opts["timeout"], opts["out"], opts["format"])

    def _wait(self, job: ProofJob, timeout: float, out: Path | None = None, fmt: str = "json") -> None:
        deadline = time.monotonic() + timeout if timeout > 0 else None
        tty = sys.stdout.isatty()
        last = ""
        while True:
            job.refresh_from_db()
            done = job.partitions.filter(state=PartitionState.DONE).count()
            filled = BAR_WIDTH * done // max(job.num_partitions, 1)
            # A job queued with no engine alive waits for ever: say so in the bar itself.
            idle = "  (no engine is running)" if job.state == JobState.QUEUED and not live_hosts() else ""
            line = f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {done}/{job.num_partitions} partitions  {job.state}{idle}"
            if line != last:
                # On a terminal the bar redraws in place; in a log each change is its own line.
                self.stdout.write(f"\r{line}" if tty else line, ending="" if tty else "\n")
                self.stdout.flush()
                last = line
            if job.state == JobState.DONE:
                if tty:
                    self.stdout.write("")
                self.stdout.write(str(write_proof(job, out, fmt)))
                return
            if job.state in (JobState.FAILED, JobState.CANCELLED):
                raise CommandError(f"job {job.job_id} {job.state}: {job.error or 'no reason recorded'}")
            if deadline is not None and time.monotonic() > deadline:
                raise CommandError(f"gave up waiting for {job.job_id} after {timeout:g}s (it is {job.state})")
            time.sleep(0.5)
