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
from html import escape as _esc
from typing import Any

from django.template.loader import render_to_string
from django.urls import reverse

from engine.console.units import (
    OOB_ATTR,
    VERSION_TOKEN,
    Fragment,
    Unit,
    content_digest,
    deadline_span,
    deadline_state,
    digest,
    leaf,
    tick,
)
from engine.figures import FINALIZE, GPU, PHASES, QUEUE, RESERVE, SYNTHESIS, TOTAL, AttemptTimes, Figure, queue_start
from engine.format import epoch_ms, fmt_ms, ms_between
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


def attempt_line(entry: dict[str, Any] | Any) -> str:
    """One failed attempt as an operator reads it, not as a Python dict."""
    if not isinstance(entry, dict):
        return str(entry)
    where = f" on {entry['host']}" if entry.get("host") else ""
    when = f" at {entry['at'][:19].replace('T', ' ')}" if isinstance(entry.get("at"), str) else ""
    note = " (handed back)" if entry.get("handed_back") else ""
    return f"attempt {entry.get('attempt', '?')}{where}{when}{note}: {entry.get('reason', '')}".rstrip(": ")


def _figure(times: AttemptTimes, figure: Figure, running: bool, now: datetime) -> dict[str, Any]:
    """A finished figure's final value; one under way ticking from its recorded start."""
    start, end = times.bounds(figure)
    ms = times.ms(figure)
    if ms is not None:
        return {"name": figure.name, "ms": ms, "html": f'<span class="final">{fmt_ms(ms)}</span>'}
    if start is not None and end is None and running:
        return {"name": figure.name, "ms": None, "html": tick(start, now)}
    return {"name": figure.name, "ms": None, "html": "<span>—</span>"}


def _row(key: str, part: Partition, active: bool, now: datetime) -> Unit:
    state = part.state
    this = current(part, part.job.submitted_at)
    figures = [_figure(this.times, f, state == RUNNING_IN[f.name], now) for f in PHASES]
    figures.append(_figure(this.times, TOTAL, active and state not in PARTITION_TERMINAL, now))
    kept_attempts = [{"number": a.number, "ended": a.ended, "host": a.host, "worker": a.worker, "reason": a.reason,
                      "figures": [{"name": f.name, "ms": a.times.ms(f), "text": fmt_ms(a.times.ms(f))}
                                  for f in ROW_FIGURES]}
                     for a in kept(part, part.job.submitted_at)]
    history = [attempt_line(e) for e in (part.errors or []) if not (isinstance(e, dict) and e.get("retry"))]
    html = render_to_string(ROWS, {
        "index": part.index, "state": state, "job_id": part.job.job_id, "version": VERSION_TOKEN,
        "attempt": part.attempt, "host": part.host.name if part.host else "",
        "worker": f"{part.worker.label} {part.worker.device}" if part.worker else "", "figures": figures,
        "error": part.error, "history": history, "kept": kept_attempts}).strip()
    return Unit(f"{key}/{part.index}", html, content_digest(html), oob_at=len(f'<div id="jobpart-{part.index}"'))


def _deadline(job: ProofJob, expected_s: float, now: datetime) -> tuple[str, str]:
    """The head's deadline attributes and its piece of the times line: an active job's
    countdown, or how a finished one's finish stood against it; nothing without one."""
    if job.deadline is None:
        return "", ""
    at = standing(job, expected_s, now)
    if job.state in JOB_ACTIVE:
        state = deadline_state(at.at_risk, at.late)
        span = " " + deadline_span(job.deadline, state, now, at_risk_from(job.deadline, job.started_at, expected_s))
    elif job.finished_at is not None:
        state = deadline_state(False, False, at.missed)
        span = " " + deadline_span(job.deadline, state, now, finished=job.finished_at)
    else:  # ended without a recorded finish: nothing to compare it with
        state, span = "on-time", ""
    return (f' data-deadline="{epoch_ms(job.deadline)}" data-deadline-state="{state}"',
            f" · deadline {job.deadline:%Y-%m-%d %H:%M:%S}{span}")


def _head(key: str, job: ProofJob, parts: list[Partition], now: datetime, expected_s: float = 0.0) -> Unit:
    running = job.state in JOB_ACTIVE
    # engine.figures: JOB_QUEUE (from its submission, or its latest retry) and the job's TOTAL
    queue_ms, total_ms = job.queue_ms, job.total_ms
    queued_from = queue_start(job.retried_at, job.submitted_at)
    queued = (fmt_ms(queue_ms) if queue_ms is not None
              else tick(queued_from, now) if running and job.started_at is None else "—")
    total = fmt_ms(total_ms) if total_ms is not None else tick(job.submitted_at, now) if running else "—"
    since = f"its retry at {job.retried_at:%H:%M:%S}" if job.retried_at else "its submission"
    facts = [f'<span class="kind">{_esc(job.kind)}</span>', f'<span class="state {_esc(job.state)}">{_esc(job.state)}</span>',
             f"priority {_esc(job.get_priority_display())}", _esc(job.get_curve_display())]
    if job.circuit_id:
        facts.append(_esc(job.circuit_id))
    facts.append(f"host {_esc(job.host.name if job.host else '—')}")
    facts.append(f"sent by {_esc(job.client.name)}" if job.client else "sent from the console or a command")
    if job.verified:
        # The key's digest in full, so it can be compared with the API's and a client's own
        # (snarkjs_json.vk_digest_of_json over verification_key.json).
        facts.append(f'verified under key <code class="vk-digest" title="verifying key digest">{_esc(job.vk_digest)}</code>'
                     if job.vk_digest else "verified")
    done = sum(p.state == PartitionState.DONE for p in parts)
    links = []
    if job.state == JobState.DONE:  # a job's proofs are served once it is done, and only then (as the API's)
        links.append(f'<a href="{_esc(reverse("console-job-proofs", args=[job.job_id]))}">download proofs (JSON)</a>')
        links.append(f'<a href="{_esc(reverse("console-job-snarkjs", args=[job.job_id]))}">'
                     "snarkjs proof.json + public.json</a>")
    links.append(f'<a href="{_esc(reverse("console-job-vk", args=[job.job_id]))}">verification_key.json</a>')
    error = f'<p class="reason">{_esc(job.error)}</p>' if job.error else ""
    marks, due = _deadline(job, expected_s, now)
    return leaf(f"{key}/head", "job-detail-head",
                f' class="job-head" data-state="{_esc(job.state)}" data-version="{VERSION_TOKEN}"{marks}>'
                f'<h1 class="job-id">{_esc(job.job_id)}</h1><p>{" · ".join(facts)}</p>'
                f'<p>submitted {job.submitted_at:%Y-%m-%d %H:%M:%S} · <span data-figure="job queue"'
                f'{_ms_attr(queue_ms)}>job queue {queued}</span> (from {since} to its first claim since) · '
                f'<span data-figure="total"{_ms_attr(total_ms)}>total {total}</span> (from its submission)'
                f' · <span class="done">{done}/{job.num_partitions or len(parts)} done</span>{due}</p>{error}'
                f'<p class="links">{" · ".join(links)}</p></div>')


def _ms_attr(ms: int | None) -> str:
    return f' data-ms="{ms}"' if ms is not None else ""


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
    bars = []
    for row, part in enumerate(parts):
        for phase, start, stop in spans[part.index]:
            x = 1000 * (start - origin).total_seconds() / total
            width = max(1000 * (stop - start).total_seconds() / total, 0.5)
            bars.append(f'<rect class="seg {phase}" x="{x:.1f}" y="{row * ROW_PX}" width="{width:.1f}" '
                        f'height="{ROW_PX - 2}"><title>P{part.index} {phase} '
                        f'{fmt_ms(ms_between(start, stop))}</title></rect>')
    height = max(len(parts), 1) * ROW_PX
    return leaf(f"{key}/timeline", "job-timeline",
                f' class="timeline" data-span-ms="{int(total * 1000)}" data-version="{VERSION_TOKEN}">'
                f'<svg viewBox="0 0 1000 {height}" preserveAspectRatio="none" height="{height}" role="img" '
                f'aria-label="partition timeline, {fmt_ms(int(total * 1000))} from submission">{"".join(bars)}</svg>'
                f'<p class="axis"><span>submitted</span><span>{fmt_ms(int(total * 1000))}</span></p></div>')


def _keys(key: str, job: ProofJob, residency: list[Resident] | None) -> Unit:
    """Where the job's proving key is resident (engine.status.residency), hot before warm: the
    hosts placement by key sends its partitions to."""
    if residency is None:
        body, hosts = "its own uploaded key, held by no host beforehand", ""
    elif not residency:
        body, hosts = '<span class="none">no host</span>', ""
    else:
        body = ", ".join(f'<span class="key-chip {r.tier_name}" data-host="{_esc(r.host)}" data-tier="{r.tier_name}">'
                         f"{_esc(r.host)} ({r.tier_name})</span>" for r in residency)
        hosts = " ".join(f"{r.host}:{r.tier_name}" for r in residency)
    return leaf(f"{key}/keys", "job-key-residency",
                f' class="key-residency" data-circuit="{_esc(job.circuit_id)}" data-hosts="{_esc(hosts)}" '
                f'data-version="{VERSION_TOKEN}">key resident on: {body}</div>')


def _log(key: str, lines: list[tuple[Any, ...]]) -> Unit:
    """The engines' last lines about the job (engine.ledger.job_log), oldest first: time, level,
    host, partition and message, as they were logged."""
    items = []
    for _, at, level, host, partition, message in lines:
        part = f'<span class="part">P{partition}</span> ' if partition is not None else ""
        items.append(f'<li class="log-line {_esc(level.lower())}" data-level="{_esc(level)}">'
                     f'<time datetime="{at.isoformat()}">{at:%H:%M:%S}.{at.microsecond // 1000:03d}</time> '
                     f'<span class="level">{_esc(level)}</span> <span class="host">{_esc(host or "—")}</span> '
                     f'{part}<span class="msg">{_esc(message)}</span></li>')
    body = f'<ol class="log-lines">{"".join(items)}</ol>' if items else '<p class="empty">No log lines yet.</p>'
    return leaf(f"{key}/log", "job-log",
                f' class="job-log" data-lines="{len(items)}" data-version="{VERSION_TOKEN}">'
                f'<h2>Log <span class="sub">the engines\' last {len(items)} line{"s" * (len(items) != 1)} about this job'
                f'</span></h2>{body}</div>')


def job_detail_units(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    key = fragment.name
    job: ProofJob | None = context["job"]
    opening = f'<section id="{fragment.dom_id}" class="panel job"{OOB_ATTR} data-version="{VERSION_TOKEN}">'
    if job is None:
        html = f'{opening}<p class="empty">No job {_esc(context["job_id"])}.</p></section>'
        return [Unit(key, html, digest(html))]
    parts: list[Partition] = context["parts"]
    head = _head(key, job, parts, now, context.get("expected_s", 0.0))
    keys = _keys(key, job, context.get("residency"))
    timeline = _timeline(key, job, parts)
    rows = [_row(key, part, job.state in JOB_ACTIVE, now) for part in parts]
    lines = _log(key, context.get("log", []))
    header = "".join(f'<span role="columnheader">{c}</span>' for c in COLUMNS)
    html = (f'{opening}{head.html}{keys.html}{timeline.html}<div class="partitions" role="table">'
            f'<div class="prow head" role="row">{header}</div>{"".join(r.html or "" for r in rows)}</div>{lines.html}'
            "</section>")
    shape = digest(repr((job.job_id, [p.index for p in parts])))
    return [Unit(key, html, shape, (head.key, keys.key, timeline.key, *(r.key for r in rows), lines.key)), head, keys,
            timeline, *rows, lines]
