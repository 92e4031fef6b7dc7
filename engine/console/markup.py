"""The console's live panels as units: each fragment's partials (templates/console/fragments/)
rendered from its read's context, every unit with a stable DOM id.

The hot fragments (pipelines, workers, task stream) are rebuilt on nearly every flush of a busy
farm, so their units are made once per content and kept: a pass renders only what moved, and
for a running phase fills in only its duration's text (the templates leave TICK_MARK or
DUE_MARK where it goes). The quieter fragments are one template each, rendered whole
(``templated``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import escape

from engine.console import reads
from engine.console.style import device_slot, kind_colour
from engine.console.units import (
    DUE_MARK,
    TICK_MARK,
    VERSION_TOKEN,
    Fragment,
    Unit,
    content_digest,
    deadline_marked,
    deadline_state,
    deadline_text,
    digest,
    final,
    render_partial,
    stencilled,
    tick_marked,
    ticking_text,
    unit,
)
from engine.figures import ms_between
from engine.format import epoch_ms, fmt_ms
from engine.states import PartitionState
from engine.status.records import DeadlineRow, OnGpuRow, PartRow

PIPELINES = "console/fragments/pipelines.html"
WORKERS = "console/fragments/workers.html"
TASKSTREAM = "console/fragments/taskstream.html"


def templated(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    """A quiet fragment: its template, rendered whole as one unit. A partition's transition
    re-reads most of them while their content stays (a counter that did not move, the same
    keys); their markup is a function of the context alone, so an equal context reuses the
    unit the last pass made (a fifth of a busy pass went to rendering them again)."""
    context.update(dom_id=fragment.dom_id, version=VERSION_TOKEN)
    last = _QUIET.get(fragment.name)
    if last is not None and last[0] == context:
        return [last[1]]
    html = render_to_string(f"console/fragments/{fragment.name}.html", context).strip()
    made = Unit(fragment.name, html, content_digest(html))
    _QUIET[fragment.name] = (context, made)
    return [made]


# The last context and unit of each quiet fragment (threads race harmlessly: a lost entry is
# rendered again).
_QUIET: dict[str, tuple[dict[str, Any], Unit]] = {}


@dataclass(frozen=True, slots=True)
class _Made:
    """A unit made once: as is when nothing in it ticks; otherwise its markup holds a TICK_MARK
    for each of ``starts`` (in order) and a DUE_MARK for ``due`` (deadline, state), which
    ``at(now)`` fill in with the texts of that moment. The digest leaves ticking texts out, so
    the markup of any moment has the same one."""

    unit: Unit
    starts: tuple[datetime, ...] = ()
    due: tuple[datetime, str] | None = None

    def at(self, now: datetime) -> Unit:
        if not self.starts and self.due is None:
            return self.unit
        html = self.unit.html or ""
        for started in self.starts:
            html = html.replace(TICK_MARK, ticking_text(started, now), 1)
        if self.due is not None:
            html = html.replace(DUE_MARK, deadline_text(self.due[0], self.due[1], now), 1)
        return Unit(self.unit.key, html, self.unit.digest, oob_at=self.unit.oob_at)


class _Memo:
    """Made units by content. A full pass keeps only what it used (so rows of finished jobs
    go); a partial pass adds to what is kept. Threads race harmlessly: a lost entry is made
    again."""

    LIMIT = 50_000

    def __init__(self) -> None:
        self.kept: dict[tuple[Any, ...], Any] = {}

    def pass_(self) -> tuple[dict[tuple[Any, ...], Any], dict[tuple[Any, ...], Any]]:
        return self.kept, {}

    def end(self, used: dict[tuple[Any, ...], Any], everything: bool) -> None:
        if everything or len(self.kept) + len(used) > self.LIMIT:
            self.kept = used
        else:
            self.kept = {**self.kept, **used}


_MEMO = _Memo()
_CARDS = _Memo()
_BARS = _Memo()


# ---- pipelines: panel → row per job → head + cell per partition ------------------------


def _make_cell(job_pk: int, job_id: str, part: PartRow) -> _Made:
    """One partition cell: finished phases with the server's final figures (engine.figures'
    synthesis, written "synth", and gpu), the running phase with its authoritative start so the
    browser can tick it."""
    state = part.state
    phases: list[str] = []
    starts: tuple[datetime, ...] = ()
    for started, finished, live_state, suffix in (
            (part.synth_started_at, part.synth_finished_at, PartitionState.SYNTHESIZING, " synth"),
            (part.gpu_started_at, part.gpu_finished_at, PartitionState.GPU, " gpu")):
        if started and finished:
            phases.append(final(fmt_ms(ms_between(started, finished)), suffix))
        elif started and state == live_state:
            phases.append(tick_marked(started, TICK_MARK, suffix))
            starts = (started,)
    values = {"pk": str(job_pk), "index": str(part.number), "state": escape(state), "job_id": escape(job_id),
              "version": VERSION_TOKEN}
    if part.batch:
        values["batch"] = escape(part.batch)
    if phases:
        values["phases"] = "".join(phases)
    html = stencilled(f"{PIPELINES}#cell", values, **({} if part.batch else {"batch": ""}),
                      **({} if phases else {"phases": ""}))
    return _Made(unit(f"pipelines/{job_pk}/{part.number}", html), starts)


def _make_head(pk: int, job_id: str, kind: str, state: str, since: datetime | None, done: int, total: int,
               deadline: datetime | None, deadline_is: str, risk_at: datetime | None, circuit: str,
               circuit_name: str) -> _Made:
    """A job's head; with a deadline, its standing (data-deadline, epoch ms, and
    data-deadline-state) and its countdown after the partitions done; a registered circuit's
    job names its circuit."""
    values = {"pk": str(pk), "job_id": escape(job_id), "href": escape(reverse("console-job", args=[job_id])),
              "kind": escape(kind), "state": escape(state), "done": str(done), "total": str(total),
              "version": VERSION_TOKEN, "elapsed": tick_marked(since, TICK_MARK, css="elapsed tick")}
    fixed: dict[str, str] = {}
    if deadline is not None:
        values.update(due=deadline_marked(deadline, deadline_is, risk_at, DUE_MARK),
                      deadline_ms=str(epoch_ms(deadline)), deadline_state=escape(deadline_is))
    else:
        fixed.update(due="", deadline_ms="", deadline_state="")
    if circuit:
        values.update(circuit_id=escape(circuit), circuit_name=escape(circuit_name))
    else:
        fixed.update(circuit_id="", circuit_name="")
    html = stencilled(f"{PIPELINES}#head", values, **fixed)
    return _Made(unit(f"pipelines/{pk}/head", html), (since,) if since is not None else (),
                 (deadline, deadline_is) if deadline is not None else None)


def _row_parts(pk: int, job_id: str) -> tuple[str, str, str]:
    """A job's row around its head and its cells: (before the head, between, after)."""
    skeleton = render_partial(f"{PIPELINES}#row", pk=pk, job_id=job_id, head=TICK_MARK, cells=DUE_MARK)
    before, rest = skeleton.split(TICK_MARK)
    between, after = rest.split(DUE_MARK)
    return before, between, after


def pipelines_units(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    units: list[Unit] = []
    rows_html: list[str] = []
    kept, used = _MEMO.pass_()
    deadlines: dict[int, DeadlineRow] = context.get("deadlines", {})
    names: Mapping[str, str] = context.get("circuit_names", {})
    for job in context["chosen"]:
        pk, job_id, kind, state, deadline = job.pk, job.job_id, job.kind, job.state, job.deadline
        started, submitted, total = job.started_at, job.submitted_at, job.num_partitions
        parts = context["parts"].get(pk, [])
        cells = []
        for part in parts:
            memo_key = (job_id, *part)
            made = used[memo_key] = kept.get(memo_key) or _make_cell(pk, job_id, part)
            cells.append(made.at(now))
        done = sum(part.state == PartitionState.DONE for part in parts)
        standing = deadlines.get(pk)
        # The deadline's standing is part of the head's content: a job turning at risk or late
        # is made again, and sent (the countdown's text ticks, as durations do).
        deadline_is = deadline_state(standing.standing.at_risk, standing.standing.late) if standing else ""
        circuit = job.circuit_id if job.circuit_id in names else ""
        head_key = (pk, job_id, kind, state, started or submitted, done, total or len(parts),
                    deadline if standing else None, deadline_is, standing.at_risk_from if standing else None,
                    circuit, names.get(circuit, ""))
        made = used[head_key] = kept.get(head_key) or _make_head(*head_key)
        head = made.at(now)
        row_key = ("row", pk, job_id)
        before, between, after = used[row_key] = kept.get(row_key) or _row_parts(pk, job_id)
        html = f"{before}{head.html}{between}{''.join(c.html or '' for c in cells)}{after}"
        shape = digest(repr((job_id, kind, [part.number for part in parts])))
        units.append(Unit(f"pipelines/{pk}", html, shape, (head.key, *(c.key for c in cells)),
                          oob_at=before.index(">")))
        units.append(head)
        units.extend(cells)
        rows_html.append(html)
    _MEMO.end(used, context["everything"])
    root = Unit(fragment.name,
                render_partial(f"{PIPELINES}#panel", dom_id=fragment.dom_id, version=VERSION_TOKEN,
                               empty=not context["jobs"], rows="".join(rows_html))
                if context["everything"] else None,
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


def _doing(group: list[OnGpuRow]) -> dict[str, Any]:
    """"proving P3 of <job>", or for a batch of one job "proving P3–P6 of <job>" (its indices
    listed when they are not a run), and when the batch went on the GPU."""
    what = []
    for job_id in sorted({part.job_id for part in group}):
        idx = sorted(part.number for part in group if part.job_id == job_id)
        run = len(idx) > 1 and idx == list(range(idx[0], idx[-1] + 1))
        what.append({"label": f"P{idx[0]}\u2013P{idx[-1]}" if run else ", ".join(f"P{i}" for i in idx),
                     "job_id": job_id})
    return {"what": what, "kinds": " ".join(sorted({part.kind for part in group})),
            "started": min(part.gpu_started_at for part in group)}


def _make_card(pk: int, ordinal: int, device: str, host: str, backend: str, parts: tuple[OnGpuRow, ...]) -> _Made:
    groups = [_doing(group) for group in _batches(parts)]
    for group in groups:
        group["busy"] = tick_marked(group["started"], TICK_MARK)
    html = render_partial(
        f"{WORKERS}#card", pk=str(pk), ordinal=str(ordinal), device=device, host=host,
        slot=device_slot(device, backend), state="proving" if parts else "idle",
        partitions=" ".join(f"{part.job_id}#{part.number}" for part in parts),
        kinds=" ".join(sorted({part.kind for part in parts})),
        batches=" ".join(sorted({part.batch for part in parts if part.batch})), groups=groups, version=VERSION_TOKEN)
    return _Made(unit(f"workers/{pk}", html), tuple(group["started"] for group in groups))


def workers_units(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    cards: list[Unit] = []
    kept, used = _CARDS.pass_()
    for worker in context["workers"]:
        key = (worker.pk, worker.ordinal, worker.device, worker.host, worker.backend,
               context["proving"].get(worker.pk, ()))
        made = used[key] = kept.get(key) or _make_card(*key)
        cards.append(made.at(now))
    _CARDS.end(used, True)
    keys = tuple(c.key for c in cards)
    root = Unit(fragment.name, stencilled(f"{WORKERS}#panel", {"cards": "".join(c.html or "" for c in cards)},
                                          dom_id=fragment.dom_id, version=VERSION_TOKEN, has_cards=bool(cards)),
                digest(repr(("workers", keys))), keys)
    return [root, *cards]


# ---- task stream: panel → lane per worker ----------------------------------------------

LANE_WIDTH = 1000.0  # the lanes' viewBox width: the window's span
# Bars are placed from an origin that moves once an hour, not with every pass, so a finished
# bar's markup holds for the hour; coordinates stay small (an SVG renderer's floats are single).
ORIGIN_S = 3600


def _bar(x: float, w: float, running: bool, kind: str, index: int, job_id: str, text: str) -> str:
    return stencilled(f"{TASKSTREAM}#bar", {"x": str(x), "w": str(w), "colour": escape(kind_colour(kind)),
                                            "index": str(index), "job_id": escape(job_id), "kind": escape(kind),
                                            "text": escape(text)}, running=running)


def taskstream_units(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    """A lane per worker, its bars the GPU phases, its figure the worker's utilisation as /status
    has it (engine.figures.UTILISATION, from the same Farm)."""
    span = float(reads.TASK_STREAM_SECONDS)
    start = now - timedelta(seconds=reads.TASK_STREAM_SECONDS)
    step = int(now.timestamp() // reads.TASK_STREAM_STEP_S)
    origin = datetime.fromtimestamp(now.timestamp() // ORIGIN_S * ORIGIN_S, tz=now.tzinfo)
    scale = LANE_WIDTH / span

    def at(moment: datetime) -> float:
        return round(scale * (moment - origin).total_seconds(), 2)

    kept, used = _BARS.pass_()
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
            seen.append((job_id, index, epoch_ms(gpu_started), epoch_ms(gpu_finished)))
            began, ended = phase
            key = (origin, row)
            if ended == now:  # still on the GPU: it grows with every pass
                bar = _bar(at(began), max(round(scale * (ended - began).total_seconds(), 2), 1.0), gpu_finished is None,
                           kind, index, job_id, fmt_ms(ms_between(gpu_started, ended)))
            else:
                bar = used[key] = kept.get(key) or _bar(
                    at(began), max(round(scale * (ended - began).total_seconds(), 2), 1.0), gpu_finished is None,
                    kind, index, job_id, fmt_ms(ms_between(gpu_started, ended)))
            bars.append(bar)
        label = f"{host} {device_slot(device, backend)} W{ordinal}"
        html = stencilled(f"{TASKSTREAM}#lane", {"pk": str(pk), "label": escape(label),
                                                 "utilisation": str(round(100.0 * context["utilisation"][pk], 1)),
                                                 "offset": str(-at(start)), "bars": "".join(bars)},
                          version=VERSION_TOKEN, width=str(int(LANE_WIDTH)), long_label=len(label) > 24)
        # Not the geometry (it slides with the clock) but which bars there are, and the step.
        lanes.append(Unit(f"taskstream/{pk}", html, digest(repr((label, seen, step))), oob_at=html.index(">")))
    _BARS.end(used, True)
    keys = tuple(lane.key for lane in lanes)
    root = Unit(fragment.name, stencilled(f"{TASKSTREAM}#panel", {"lanes": "".join(lane.html or "" for lane in lanes)},
                                          dom_id=fragment.dom_id, version=VERSION_TOKEN, has_lanes=bool(lanes),
                                          minutes=reads.TASK_STREAM_SECONDS // 60),
                digest(repr(("taskstream", keys))), keys)
    return [root, *lanes]
