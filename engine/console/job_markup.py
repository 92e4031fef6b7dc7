"""One job's live page (/jobs/<id>): its markup as units, so its stream swaps what changed.

The page and its stream (/events/?job=<id>) show one fragment, ``job:<id>``: a head (state,
times, the proof links once there are proofs), where its key is resident (``job-key-residency``),
a row per partition and the engines' last log
lines about the job (``job-log``), each a unit with a stable id. A transition resends one row; the job ending resends the head with its final
figures and links. Running phases carry their start (data-started-at), so the browser ticks
them between flushes. The markup is shared by every viewer of the job: nothing in it may
depend on who looks (the admin link stays on the page, outside the fragment).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from engine.console.style import circuit_label, circuit_note
from engine.console.units import (
    VERSION_TOKEN,
    Fragment,
    Unit,
    deadline_span,
    deadline_state,
    digest,
    render_partial,
    ticking_text,
    unit,
)
from engine.figures import FINALIZE, GPU, PHASES, QUEUE, RESERVE, SYNTHESIS, TOTAL, AttemptTimes, Figure, queue_start
from engine.format import curve_text, epoch_ms, fmt_moment, fmt_ms, iso_moment, ms_between
from engine.ledger.deadlines import at_risk_from, standing
from engine.models import Partition, ProofJob
from engine.states import JOB_ACTIVE, PARTITION_TERMINAL, JobState, PartitionState
from engine.status.attempts import current, kept
from engine.status.residency import Resident

# The figures of a partition's row (engine.figures), and the state in which each is under way
# (it then ticks from its recorded start); total runs while the partition is claimed or queued.
ROW_FIGURES = (*PHASES, TOTAL)
RUNNING_IN = {QUEUE.name: PartitionState.PENDING, RESERVE.name: PartitionState.RESERVING,
              SYNTHESIS.name: PartitionState.SYNTHESIZING, GPU.name: PartitionState.GPU,
              FINALIZE.name: PartitionState.FINALIZING}
COLUMNS = ("P", "state", "attempt", "host", "worker", *(f.name for f in ROW_FIGURES), "errors")
ROWS = "console/fragments/job_parts.html#part-row"
DETAIL = "console/fragments/job_detail.html"


def attempt_line(entry: dict[str, Any] | Any) -> str:
    """One failed attempt as an operator reads it, not as a Python dict."""
    if not isinstance(entry, dict):
        return str(entry)
    where = f" on {entry['host']}" if entry.get("host") else ""
    at = parse_datetime(entry["at"]) if isinstance(entry.get("at"), str) else None
    when = f" at {fmt_moment(at)}" if at is not None else ""
    note = " (handed back)" if entry.get("handed_back") else ""
    return f"attempt {entry.get('attempt', '?')}{where}{when}{note}: {entry.get('reason', '')}".rstrip(": ")


def _figure(name: str, ms: int | None, start: datetime | None, running: bool, now: datetime) -> dict[str, Any]:
    """A figure for console/units.html#figure: a finished one's final value; one under way
    ticking from its recorded start; else none."""
    if ms is not None:
        return {"name": name, "ms": ms, "text": fmt_ms(ms)}
    if start is not None and running:
        return {"name": name, "ms": None, "running": True, "started_ms": epoch_ms(start),
                "text": ticking_text(start, now)}
    return {"name": name, "ms": None}


def _attempt_figure(times: AttemptTimes, figure: Figure, running: bool, now: datetime) -> dict[str, Any]:
    start, end = times.bounds(figure)
    return _figure(figure.name, times.ms(figure), start, running and end is None, now)


def _row(key: str, part: Partition, active: bool, now: datetime) -> Unit:
    state = part.state
    this = current(part, part.job.submitted_at)
    figures = [_attempt_figure(this.times, f, state == RUNNING_IN[f.name], now) for f in PHASES]
    figures.append(_attempt_figure(this.times, TOTAL, active and state not in PARTITION_TERMINAL, now))
    kept_attempts = [{"number": a.number, "ended": a.ended, "host": a.host, "worker": a.worker, "reason": a.reason,
                      "figures": [{"name": f.name, "ms": a.times.ms(f), "text": fmt_ms(a.times.ms(f))}
                                  for f in ROW_FIGURES]}
                     for a in kept(part, part.job.submitted_at)]
    history = [attempt_line(e) for e in (part.errors or []) if not (isinstance(e, dict) and e.get("retry"))]
    html = render_partial(ROWS, **{
        "index": part.index, "state": state, "job_id": part.job.job_id, "version": VERSION_TOKEN,
        "attempt": part.attempt, "host": part.host.name if part.host else "",
        "worker": f"{part.worker.label} {part.worker.device}" if part.worker else "", "figures": figures,
        "error": part.error, "history": history, "kept": kept_attempts}).strip()
    return unit(f"{key}/{part.index}", html)


def _deadline(job: ProofJob, expected_s: float, now: datetime) -> dict[str, Any] | None:
    """The head's deadline: its moment, its standing (data-deadline-state) and an active job's
    countdown or how a finished one's finish stood against it; None without one."""
    if job.deadline is None:
        return None
    at = standing(job, expected_s, now)
    if job.state in JOB_ACTIVE:
        state = deadline_state(at.at_risk, at.late)
        span = deadline_span(job.deadline, state, now, at_risk_from(job.deadline, job.started_at, expected_s))
    elif job.finished_at is not None:
        state = deadline_state(False, False, at.missed)
        span = deadline_span(job.deadline, state, now, finished=job.finished_at)
    else:  # ended without a recorded finish: nothing to compare it with
        state, span = "on-time", ""
    return {"ms": epoch_ms(job.deadline), "state": state, "iso": iso_moment(job.deadline),
            "when": fmt_moment(job.deadline), "span": span}


def circuit_of(job: ProofJob, names: dict[str, str]) -> dict[str, str] | None:
    """The job's circuit as its page names it: a registered circuit by its name, its id in full
    in the title, and what kind of id it is."""
    if not job.circuit_id:
        return None
    return {"id": job.circuit_id, "name": circuit_label(job.circuit_id, names), "note": circuit_note(job.circuit_id)}


def _head(key: str, job: ProofJob, parts: list[Partition], now: datetime, expected_s: float,
          names: dict[str, str]) -> Unit:
    running = job.state in JOB_ACTIVE
    # engine.figures: JOB_QUEUE (from its submission, or its latest retry) and the job's TOTAL
    queued_from = queue_start(job.retried_at, job.submitted_at)
    html = render_partial(
        f"{DETAIL}#head", job=job, version=VERSION_TOKEN, curve=curve_text(job.curve), circuit=circuit_of(job, names),
        host=job.host.name if job.host else "", submitted=fmt_moment(job.submitted_at),
        submitted_iso=iso_moment(job.submitted_at),
        retried=fmt_moment(job.retried_at) if job.retried_at else "", retried_iso=iso_moment(job.retried_at),
        queue=_figure("job queue", job.queue_ms, queued_from, running and job.started_at is None, now),
        total=_figure("total", job.total_ms, job.submitted_at, running, now),
        done=sum(p.state == PartitionState.DONE for p in parts), num_partitions=job.num_partitions or len(parts),
        deadline=_deadline(job, expected_s, now),
        # a job's proofs are served once it is done, and only then (as the API's)
        proofs=job.state == JobState.DONE)
    return unit(f"{key}/head", html)


# A partition's life as the records time it, and the class each stretch is drawn with.
STRETCHES = (("queued", "submitted", "claimed_at"), ("reserving", "claimed_at", "synth_started_at"),
          ("synthesizing", "synth_started_at", "synth_finished_at"), ("waiting", "synth_finished_at", "gpu_started_at"),
          ("gpu", "gpu_started_at", "gpu_finished_at"), ("finalizing", "gpu_finished_at", "finished_at"))
ROW_PX = 12


def _spans(job: ProofJob, part: Partition) -> list[tuple[str, datetime, datetime]]:
    """(phase, start, end) of each stretch the records close: a stretch ends at the next mark
    recorded (a claim may be unrecorded in an old row); the one in progress is not drawn, so the
    drawing changes only when a record does."""
    marks: list[datetime | None] = [part.times.queue_start, *(getattr(part, name) for _, _, name in STRETCHES)]
    out = []
    for i, (phase, _, _) in enumerate(STRETCHES):
        start = marks[i]
        end = next((m for m in marks[i + 1:] if m is not None), None)
        if start is not None and end is not None:
            out.append((phase, start, end))
    return out


def _timeline(key: str, job: ProofJob, parts: list[Partition]) -> Unit:
    """Every partition's recorded stretches on one time axis from the job's submission, drawn
    on the server as SVG: where a job's time went, per partition."""
    spans = {part.index: _spans(job, part) for part in parts}
    end = max((e for rows in spans.values() for _, _, e in rows), default=job.submitted_at)
    origin = min((s for rows in spans.values() for _, s, _ in rows), default=job.submitted_at)
    total = max((end - origin).total_seconds(), 1e-3)
    bars = [{"phase": phase, "index": part.index, "y": row * ROW_PX,
             "x": f"{1000 * (start - origin).total_seconds() / total:.1f}",
             "width": f"{max(1000 * (stop - start).total_seconds() / total, 0.5):.1f}",
             "text": fmt_ms(ms_between(start, stop))}
            for row, part in enumerate(parts) for phase, start, stop in spans[part.index]]
    height = max(len(parts), 1) * ROW_PX
    html = render_partial(f"{DETAIL}#timeline", version=VERSION_TOKEN, span_ms=int(total * 1000), height=height,
                          span=fmt_ms(int(total * 1000)), bars=bars, row_px=ROW_PX)
    return unit(f"{key}/timeline", html)


def _keys(key: str, job: ProofJob, residency: list[Resident] | None) -> Unit:
    """Where the job's proving key is resident (engine.status.residency), hot before warm: the
    hosts placement by key sends its partitions to."""
    html = render_partial(f"{DETAIL}#keys", version=VERSION_TOKEN, circuit_id=job.circuit_id, own=residency is None,
                          residency=residency or [],
                          hosts=" ".join(f"{r.host}:{r.tier_name}" for r in residency or []))
    return unit(f"{key}/keys", html)


def _log(key: str, lines: list[tuple[Any, ...]]) -> Unit:
    """The engines' last lines about the job (engine.ledger.job_log), oldest first: time, level,
    host, partition and message, as they were logged."""
    shown = [{"iso": iso_moment(at), "clock": fmt_moment(at, ms=True), "full": fmt_moment(at, ms=True),
              "level": level, "host": host, "partition": partition, "message": message}
             for _, at, level, host, partition, message in lines]
    return unit(f"{key}/log", render_partial(f"{DETAIL}#log", version=VERSION_TOKEN, lines=shown))


def job_detail_units(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    key = fragment.name
    job: ProofJob | None = context["job"]
    if job is None:
        html = render_partial(f"{DETAIL}#section", dom_id=fragment.dom_id, version=VERSION_TOKEN, missing=True,
                              job_id=context["job_id"])
        return [Unit(key, html, digest(html))]
    parts: list[Partition] = context["parts"]
    head = _head(key, job, parts, now, context.get("expected_s", 0.0), context.get("circuit_names", {}))
    keys = _keys(key, job, context.get("residency"))
    timeline = _timeline(key, job, parts)
    rows = [_row(key, part, job.state in JOB_ACTIVE, now) for part in parts]
    lines = _log(key, context.get("log", []))
    html = render_partial(f"{DETAIL}#section", dom_id=fragment.dom_id, version=VERSION_TOKEN, missing=False,
                          head=head.html, keys=keys.html, timeline=timeline.html, columns=COLUMNS,
                          rows="".join(r.html or "" for r in rows), log=lines.html)
    shape = digest(repr((job.job_id, [p.index for p in parts])))
    return [Unit(key, html, shape, (head.key, keys.key, timeline.key, *(r.key for r in rows), lines.key)), head, keys,
            timeline, *rows, lines]
