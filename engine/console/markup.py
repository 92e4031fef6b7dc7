"""The hot fragments' markup (pipelines, workers, task stream), built as Python strings.

They are rebuilt on nearly every flush of a busy farm, and template nodes were most of a
pass's cost; the quieter fragments stay Django templates (``templated``). Each builder turns
its read's context into units (engine.console.units) with stable DOM ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape as _esc
from typing import Any

from django.template.loader import render_to_string
from django.urls import reverse

from engine.console import reads
from engine.console.style import device_slot, kind_colour
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
from engine.figures import ms_between
from engine.format import epoch_ms, fmt_ms
from engine.states import PartitionState
from engine.status.records import DeadlineRow, OnGpuRow, PartRow


def templated(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    """A quiet fragment: its template, rendered whole as one unit."""
    context.update(dom_id=fragment.dom_id, version=VERSION_TOKEN, now_ms=epoch_ms(now))
    html = render_to_string(f"console/fragments/{fragment.name}.html", context).strip()
    return [Unit(fragment.name, html, content_digest(html))]


# ---- pipelines: panel → row per job → head + cell per partition ------------------------
#
# A busy farm's pipelines panel holds a thousand cells and is rebuilt on nearly every flush,
# while between two flushes only the few partitions that moved change. Each head and cell is
# therefore made once per content (its row as read) and kept: a pass rebuilds only what moved,
# and for a ticking phase only its duration's text, which is all that differs from the
# previous pass's markup (and is left out of the digest anyway).

_TICK = "\x00"  # where the ticking duration goes in a made unit's markup
_DUE = "\x01"  # where a deadline's countdown goes


@dataclass(frozen=True, slots=True)
class _Made:
    """A unit made once: `unit` as is when nothing in it ticks; otherwise its markup around
    its one ticking duration, which `at(now)` fills in."""

    unit: Unit
    before: str = ""
    after: str = ""
    started: datetime | None = None
    suffix: str = ""
    css: str = "tick"
    due: tuple[datetime, str, datetime | None] | None = None  # a deadline counting down: _DUE in the markup

    def at(self, now: datetime) -> Unit:
        if self.started is None and self.due is None:
            return self.unit
        html = self.before + (tick(self.started, now, self.suffix, self.css) if self.started is not None else "") + self.after
        if self.due is not None:
            html = html.replace(_DUE, deadline_span(self.due[0], self.due[1], now, self.due[2]), 1)
        return Unit(self.unit.key, html, self.unit.digest, oob_at=self.unit.oob_at)


def _made(key: str, dom_id: str, rest: str, ticking: tuple[datetime, str, str] | None, now: datetime,
          due: tuple[datetime, str, datetime | None] | None = None) -> _Made:
    """`rest` is a leaf's markup with _TICK where `ticking` (start, suffix, css) goes, and _DUE
    where `due` (deadline, deadline state, when it turns at risk) counts down."""
    if ticking is None and due is None:
        return _Made(leaf(key, dom_id, rest))
    filled = rest if due is None else rest.replace(_DUE, deadline_span(due[0], due[1], now, due[2]), 1)
    if ticking is None:
        return _Made(leaf(key, dom_id, filled), f'<div id="{dom_id}"' + rest, due=due)
    started, suffix, css = ticking
    before, _, after = rest.rpartition(_TICK)  # the duration comes after the job's id
    # The digest leaves the ticking texts out, so the markup of any moment gives the same one.
    unit = leaf(key, dom_id, filled.replace(_TICK, tick(started, now, suffix, css), 1))
    return _Made(unit, f'<div id="{dom_id}"' + before, after, started, suffix, css, due)


class _Memo:
    """Made units by content. A full pass keeps only what it used (so rows of finished jobs
    go); a partial pass adds to what is kept. Threads race harmlessly: a lost entry is made
    again."""

    LIMIT = 50_000

    def __init__(self) -> None:
        self.kept: dict[tuple[Any, ...], _Made] = {}

    def pass_(self) -> tuple[dict[tuple[Any, ...], _Made], dict[tuple[Any, ...], _Made]]:
        return self.kept, {}

    def end(self, used: dict[tuple[Any, ...], _Made], everything: bool) -> None:
        if everything or len(self.kept) + len(used) > self.LIMIT:
            self.kept = used
        else:
            self.kept = {**self.kept, **used}


_MEMO = _Memo()


def _make_cell(job_pk: int, job_id: str, part: PartRow, now: datetime) -> _Made:
    """One partition cell: finished phases with the server's final figures (engine.figures'
    synthesis, written "synth", and gpu), the running phase with its authoritative start so the
    browser can tick it."""
    index, state, batch = part.number, part.state, part.batch
    synth_started, synth_finished = part.synth_started_at, part.synth_finished_at
    gpu_started, gpu_finished = part.gpu_started_at, part.gpu_finished_at
    batch_attr = f' data-batch="{_esc(batch)}"' if batch else ""
    lines: list[str] = []
    ticking: tuple[datetime, str, str] | None = None
    for started, finished, live_state, suffix in (
            (synth_started, synth_finished, PartitionState.SYNTHESIZING, " synth"),
            (gpu_started, gpu_finished, PartitionState.GPU, " gpu")):
        if started and finished:
            lines.append(f'<span class="final">{fmt_ms(ms_between(started, finished))}{suffix}</span>')
        elif started and state == live_state:
            lines.append(_TICK)
            ticking = (started, suffix, "tick")
    if not lines:
        lines.append(f"<span>{state}</span>")
    return _made(f"pipelines/{job_pk}/{index}", f"cell-{job_pk}-{index}",
                 f' class="cell {state}" data-partition="{_esc(job_id)}#{index}" data-state="{state}" '
                 f'data-version="{VERSION_TOKEN}"{batch_attr} title="P{index} {state}"><b>P{index}</b>{"".join(lines)}</div>',
                 ticking, now)


def _make_head(pk: int, job_id: str, kind: str, state: str, since: datetime | None, done: int, total: int,
               deadline: datetime | None, deadline_is: str, risk_at: datetime | None, now: datetime) -> _Made:
    """A job's head; with a deadline, its standing (data-deadline, epoch ms, and
    data-deadline-state) and its countdown after the partitions done."""
    due = (deadline, deadline_is, risk_at) if deadline is not None else None
    marks = f' data-deadline="{epoch_ms(deadline)}" data-deadline-state="{deadline_is}"' if due else ""
    return _made(f"pipelines/{pk}/head", f"job-{pk}-head",
                 f' class="pipeline-head" data-version="{VERSION_TOKEN}" data-kind="{_esc(kind)}" '
                 f'data-job-state="{_esc(state)}" data-done="{done}" data-total="{total}"{marks}>'
                 f'<a class="job-id" href="{_esc(reverse("console-job", args=[job_id]))}">{_esc(job_id)}</a> '
                 f'<span class="kind">{_esc(kind)}</span> <span class="state">{_esc(state)}</span> '
                 f'{_TICK if since is not None else tick(None, now, css="elapsed tick")} '
                 f'<span class="done">{done}/{total} done</span>{" " + _DUE if due else ""}</div>',
                 (since, "", "elapsed tick") if since is not None else None, now, due)


def pipelines_units(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    units: list[Unit] = []
    rows_html: list[str] = []
    kept, used = _MEMO.pass_()
    deadlines: dict[int, DeadlineRow] = context.get("deadlines", {})
    for job in context["chosen"]:
        pk, job_id, kind, state, deadline = job.pk, job.job_id, job.kind, job.state, job.deadline
        started, submitted, total = job.started_at, job.submitted_at, job.num_partitions
        parts = context["parts"].get(pk, [])
        cells = []
        for part in parts:
            memo_key = (job_id, *part)
            made = used[memo_key] = kept.get(memo_key) or _make_cell(pk, job_id, part, now)
            cells.append(made.at(now))
        done = sum(part.state == PartitionState.DONE for part in parts)
        standing = deadlines.get(pk)
        # The deadline's standing is part of the head's content: a job turning at risk or late
        # is made again, and sent (the countdown's text ticks, as durations do).
        deadline_is = deadline_state(standing.standing.at_risk, standing.standing.late) if standing else ""
        head_key = (pk, job_id, kind, state, started or submitted, done, total or len(parts),
                    deadline if standing else None, deadline_is, standing.at_risk_from if standing else None)
        made = used[head_key] = kept.get(head_key) or _make_head(*head_key, now)
        head = made.at(now)
        key = f"pipelines/{pk}"
        html = (f'<div id="job-{pk}" class="pipeline" data-job="{_esc(job_id)}">{head.html}'
                f'<div class="cells">{"".join(c.html or "" for c in cells)}</div></div>')
        shape = digest(repr((job_id, kind, [part.number for part in parts])))
        units.append(Unit(key, html, shape, (head.key, *(c.key for c in cells)), oob_at=len(f'<div id="job-{pk}"')))
        units.append(head)
        units.extend(cells)
        rows_html.append(html)
    _MEMO.end(used, context["everything"])
    body = "".join(rows_html) if context["jobs"] else '<p class="empty">Nothing in flight.</p>'
    root = Unit(fragment.name,
                (f'<section id="{fragment.dom_id}" class="panel pipelines"{OOB_ATTR} data-version="{VERSION_TOKEN}">'
                 f"<h2>Active pipelines</h2>{body}</section>") if context["everything"] else None,
                context["shape"], tuple(f"pipelines/{job.pk}" for job in context["jobs"]))
    return [root, *units]


# ---- GPU workers: panel → card per worker -----------------------------------------------


def _batches(parts: tuple[OnGpuRow, ...]) -> list[list[OnGpuRow]]:
    """A worker's partitions on the GPU, one group per batch (a partition alone is its own)."""
    groups: dict[Any, list[OnGpuRow]] = {}
    for part in parts:
        batch = part.batch or ("alone", part.job_id, part.number)
        groups.setdefault(batch, []).append(part)
    return list(groups.values())


def _doing(group: list[OnGpuRow], now: datetime) -> str:
    """"proving P3 of <job>", or for a batch of one job "proving P3–P6 of <job>" (its indices
    listed when they are not a run)."""
    jobs = sorted({part.job_id for part in group})
    kinds = " ".join(sorted({part.kind for part in group}))
    started = min(part.gpu_started_at for part in group)
    what = []
    for job_id in jobs:
        idx = sorted(part.number for part in group if part.job_id == job_id)
        run = len(idx) > 1 and idx == list(range(idx[0], idx[-1] + 1))
        label = f"P{idx[0]}\u2013P{idx[-1]}" if run else ", ".join(f"P{i}" for i in idx)
        what.append(f'{label} of <span class="job-id">{_esc(job_id)}</span>')
    return (f'<div class="doing">proving {" and ".join(what)} <span class="kind">{_esc(kinds)}</span></div>'
            f'<div class="busy">busy {tick(started, now)}</div>')


def workers_units(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    cards: list[Unit] = []
    for worker in context["workers"]:
        pk, ordinal, device, host, backend = worker.pk, worker.ordinal, worker.device, worker.host, worker.backend
        parts = context["proving"].get(pk, ())
        state = "proving" if parts else "idle"
        doing = "".join(_doing(group, now) for group in _batches(parts)) or '<div class="doing">idle</div>'
        attr = _esc(" ".join(f"{part.job_id}#{part.number}" for part in parts))
        kinds = _esc(" ".join(sorted({part.kind for part in parts})))
        batches = " ".join(sorted({part.batch for part in parts if part.batch}))
        batch_attr = f' data-batch="{_esc(batches)}"' if batches else ""
        cards.append(leaf(
            f"workers/{pk}", f"worker-{pk}",
            f' class="card {state}" data-worker="{_esc(f"{host}/{device}/W{ordinal}")}" data-state="{state}" '
            f'data-partition="{attr}" data-version="{VERSION_TOKEN}" data-kinds="{kinds}" data-host="{_esc(host)}"'
            f"{batch_attr}>"
            f'<div class="card-head"><strong>W{ordinal}</strong> '
            f'<span class="device">{_esc(device_slot(device, backend))}</span> <span class="host">{_esc(host)}</span>'
            f"</div>{doing}</div>"))
    body = "".join(c.html or "" for c in cards) or '<p class="empty">No workers registered.</p>'
    keys = tuple(c.key for c in cards)
    root = Unit(fragment.name, f'<section id="{fragment.dom_id}" class="panel workers"{OOB_ATTR} '
                f'data-version="{VERSION_TOKEN}"><h2>GPU workers</h2><div class="cards">{body}</div></section>',
                digest(repr(("workers", keys))), keys)
    return [root, *cards]


# ---- task stream: panel → lane per worker ----------------------------------------------


def taskstream_units(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    """A lane per worker, its bars the GPU phases, its figure the worker's utilisation as /status
    has it (engine.figures.UTILISATION, from the same Farm)."""
    width = 1000.0
    span = float(reads.TASK_STREAM_SECONDS)
    start = now - timedelta(seconds=reads.TASK_STREAM_SECONDS)
    step = int(now.timestamp() // reads.TASK_STREAM_STEP_S)
    lanes: list[Unit] = []
    for worker in context["workers"]:
        pk, ordinal, device, host, backend = worker.pk, worker.ordinal, worker.device, worker.host, worker.backend
        bars: list[str] = []
        seen: list[tuple[Any, ...]] = []
        for row in context["bars"].get(pk, []):
            phase = row.span(now)
            if phase is None or phase[1] <= start:
                continue
            index, job_id, kind, gpu_started, gpu_finished = row.number, row.job_id, row.kind, row.gpu_started_at, \
                row.gpu_finished_at
            began, ended = max(phase[0], start), phase[1]
            seen.append((job_id, index, epoch_ms(gpu_started), epoch_ms(gpu_finished)))
            x = round(width * (began - start).total_seconds() / span, 2)
            w = max(round(width * (ended - began).total_seconds() / span, 2), 1.0)
            text = fmt_ms(ms_between(gpu_started, ended))
            bars.append(f'<rect class="bar{" running" if gpu_finished is None else ""}" x="{x}" y="2" width="{w}" '
                        f'height="16" fill="{kind_colour(kind)}"><title>P{index} of {_esc(job_id)} ({_esc(kind)}) '
                        f"{text} gpu</title></rect>")
        util = round(100.0 * context["utilisation"][pk], 1)
        label = _esc(f"{host} {device_slot(device, backend)} W{ordinal}")
        opening = f'<div id="lane-{pk}"'
        html = (f'{opening} class="lane-row" data-worker-lane="{label}" data-version="{VERSION_TOKEN}">'
                f'<span class="lane-label">{label} <b>{util}%</b></span>'
                f'<svg viewBox="0 0 {int(width)} 20" preserveAspectRatio="none" role="img" '
                f'aria-label="GPU task stream of {label}"><rect class="lane" x="0" y="0" width="{int(width)}" '
                f'height="20"></rect>{"".join(bars)}</svg></div>')
        # Not the geometry (it slides with the clock) but which bars there are, and the step.
        lanes.append(Unit(f"taskstream/{pk}", html, digest(repr((label, seen, step))), oob_at=len(opening)))
    minutes = reads.TASK_STREAM_SECONDS // 60
    body = (f'<div class="stream">{"".join(lane.html or "" for lane in lanes)}</div>' if lanes
            else '<p class="empty">No GPU workers.</p>')
    keys = tuple(lane.key for lane in lanes)
    root = Unit(fragment.name, f'<section id="{fragment.dom_id}" class="panel taskstream"{OOB_ATTR} '
                f'data-version="{VERSION_TOKEN}"><h2>Task stream <span class="sub">GPU phase per partition, '
                f"last {minutes} minutes</span></h2>{body}</section>", digest(repr(("taskstream", keys))), keys)
    return [root, *lanes]
