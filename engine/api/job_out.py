"""How a job is written out: its links, its summary and detail, and its proof documents
(ours, and snarkjs's proof.json / public.json of one partition)."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.utils import timezone

from engine.format import curve_name, iso_moment
from engine.ledger.deadlines import expected_seconds, standing
from engine.models import Partition, ProofJob
from engine.states import JobState, PartitionState, Priority
from engine.status.attempts import current, kept


def _links(job: ProofJob) -> dict[str, str]:
    def url(view: str) -> str:
        return reverse(f"api-v1:{view}", kwargs={"job_id": job.job_id})

    return {"self": url("get_job"), "proof": url("get_proof"), "proof_bytes": url("get_proof") + "?format=bytes",
            "snarkjs": url("get_snarkjs_proof"), "verification_key": url("get_job_key"),
            "cancel": url("cancel"), "retry": url("retry")}


def deadline_fields(job: ProofJob, expected: dict[str, float] | None = None) -> dict[str, Any]:
    """The job against its deadline now (engine.ledger.deadlines); ``expected``: its circuit's
    expected seconds when the caller read them for a whole page."""
    if job.deadline is None:
        return {"deadline": None, "slack_secs": None, "at_risk": False, "late": False, "missed_deadline": False}
    if expected is None or job.circuit_id not in expected:
        expected = expected_seconds([job.circuit_id])
    now = standing(job, expected[job.circuit_id], timezone.now())
    return {"deadline": now.deadline, "slack_secs": now.slack_s, "at_risk": now.at_risk, "late": now.late,
            "missed_deadline": now.missed}


def job_summary(job: ProofJob, parts: list[Partition] | None = None,
             expected: dict[str, float] | None = None) -> dict[str, Any]:
    done = (sum(p.state == PartitionState.DONE for p in parts) if parts is not None
            else getattr(job, "n_done", None))
    if done is None:
        done = job.partitions.filter(state=PartitionState.DONE).count()
    return {
        "job_id": job.job_id, "kind": job.kind, "state": job.state, "priority": Priority(job.priority).label,
        "curve": job.curve, "curve_name": curve_name(job.curve), "circuit_id": job.circuit_id,
        "num_partitions": job.num_partitions,
        "partitions_done": done, "submitted_at": job.submitted_at, "started_at": job.started_at,
        "finished_at": job.finished_at, "verified": job.verified, "error": job.error,
        "vk_digest": job.vk_digest or None, **deadline_fields(job, expected),
    }


def job_detail(job: ProofJob) -> dict[str, Any]:
    parts = list(job.partitions.select_related("host", "worker").order_by("index"))
    body = job_summary(job, parts)
    done = job.state == JobState.DONE
    # engine.figures: the job's queue (since its latest retry) and total; each partition's current
    # attempt's phases, and every attempt it kept with its own (engine.status.attempts).
    body.update(
        queue_secs=None if job.queue_ms is None else job.queue_ms / 1000,
        total_secs=None if job.total_ms is None else job.total_ms / 1000,
        partitions=[{
            "index": p.index, "state": p.state, "attempt": p.attempt,
            "host": p.host.name if p.host else None, "worker": p.worker.label if p.worker else None,
            **current(p, job.submitted_at).figures_ms(),
            "queued_at": p.requeued_at or job.submitted_at, "claimed_at": p.claimed_at,
            "synth_started_at": p.synth_started_at, "gpu_started_at": p.gpu_started_at,
            "finished_at": p.finished_at, "error": p.error, "vk_digest": p.vk_digest or None,
            "attempts": [a.as_json() for a in kept(p, job.submitted_at)],
        } for p in parts],
        callbacks=[{"url": c.url, "event": c.event, "delivered_at": c.delivered_at, "gave_up_at": c.gave_up_at,
                    # each attempt's moment as every other moment the API writes
                    "attempts": [{**a, "at": iso_moment(a.get("at"))} if isinstance(a, dict) else a for a in c.attempts]}
                   for c in job.callbacks.order_by("pk")],
        proof=job.proof if done else None,
        public_inputs=job.public_inputs if done else None,
        links=_links(job),
    )
    return body


def proof_document(job: ProofJob) -> dict[str, Any]:
    """A done job's proof in our format: the job's identity and every partition's proof."""
    parts = job.partitions.order_by("index")
    return {"job_id": job.job_id, "kind": job.kind, "curve": job.curve, "curve_name": curve_name(job.curve),
            "circuit_id": job.circuit_id,
            "verified": job.verified, "proof": job.proof, "public_inputs": job.public_inputs,
            "partitions": [{"index": p.index, "proof": p.proof, "public_inputs": p.public_inputs} for p in parts]}


def snarkjs_files(job: ProofJob, part: Partition) -> tuple[dict[str, Any], list[str]]:
    """proof.json and public.json of one partition, as snarkjs writes them.

    The finalizer stores proof.json's form already; reading it back through the prover's
    parser and writing it again checks it and gives snarkjs's exact layout."""
    from engine.prover import snarkjs

    proof = snarkjs.proof_to_json(snarkjs.proof_from_json(part.proof))
    public = snarkjs.public_to_json([int(x) for x in part.public_inputs or []])
    return proof, public
