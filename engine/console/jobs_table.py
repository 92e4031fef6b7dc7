"""The jobs page's table as a live fragment: "jobs:<query>", the page's query in canonical form.

The page (/jobs/) and its stream (/events/?jobs=<query>) show the same fragment: a section
(the count, the sortable headers, the page links) holding a row per job, each a unit with a
stable id (``job-row-<pk>``). Every pass reads the query whole in its snapshot, so the table
shows exactly what a reload would: a job's transition resends its row; a job arriving,
leaving the filter or moving in the order resends the section. The markup is shared by every
viewer of the same query: nothing in it depends on who looks (no CSRF token: the rows'
buttons and checkboxes belong to a form outside the fragment, ``form="jobs-actions"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, time
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.db.models import (
    Case,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    QuerySet,
    Value,
    When,
)
from django.db.models.expressions import OrderBy
from django.db.models.functions import Coalesce
from django.http import QueryDict
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.dateparse import parse_date

from engine.console.units import TICK_MARK, VERSION_TOKEN, Fragment, Unit, digest, ticking_text, unit
from engine.format import epoch_ms, fmt_ms
from engine.models import ProofJob
from engine.states import JOB_ACTIVE, JobState, ProofKind
from engine.status.job_list import DEADLINE_FILTERS, JobFilter, matching, with_progress
from engine.status.read_model import Farm
from engine.status.records import DeadlineRow

PAGE_SIZE = 50
TEMPLATE = "console/fragments/jobs.html"


# The sortable columns, as the header names them and as ?sort= spells them ("-" first: descending).
COLUMNS = ("job", "kind", "state", "priority", "partitions", "client", "submitted", "total")
DEFAULT_SORT = "-submitted"
# A job's life in order, for sorting by state.
STATE_ORDER = (JobState.QUEUED, JobState.RUNNING, JobState.DONE, JobState.FAILED, JobState.CANCELLED)


@dataclass(frozen=True)
class JobsQuery:
    """What the page shows: its filters, search, sort and page, each checked. A value the page
    cannot use is dropped (the filters) or replaced by the default (the sort, remembered in
    ``refused_sort`` so the page can say so)."""

    kind: str = ""
    state: str = ""
    client: str = ""
    since: str = ""
    q: str = ""
    deadline: str = ""
    sort: str = DEFAULT_SORT
    page: int = 1
    refused_sort: str = ""

    @classmethod
    def parse(cls, params: Mapping[str, Any]) -> JobsQuery:
        def get(name: str) -> str:
            return str(params.get(name, "") or "").strip()

        since = get("since")
        sort = get("sort")
        page = get("page")
        return cls(
            kind=get("kind") if get("kind") in ProofKind.values else "",
            state=get("state") if get("state") in JobState.values else "",
            client=get("client"),
            since=since if since and _date(since) else "",
            q=get("q"),
            deadline=get("deadline") if get("deadline") in DEADLINE_FILTERS else "",
            sort=sort if sort.removeprefix("-") in COLUMNS else DEFAULT_SORT,
            page=int(page) if page.isdigit() and len(page) <= 9 and int(page) > 0 else 1,
            refused_sort=sort if sort and sort.removeprefix("-") not in COLUMNS else "",
        )

    @classmethod
    def decode(cls, encoded: str) -> JobsQuery:
        return cls.parse(QueryDict(encoded))

    def params(self, **changes: Any) -> dict[str, str]:
        """The query as URL parameters, defaults left out (the sort always in)."""
        query = replace(self, **changes)
        out = {name: getattr(query, name) for name in ("kind", "state", "client", "since", "q", "deadline")}
        out = {name: value for name, value in out.items() if value}
        out["sort"] = query.sort
        if query.page > 1:
            out["page"] = str(query.page)
        return out

    def encoded(self, **changes: Any) -> str:
        """The canonical query string: two pages showing the same view share one fragment."""
        return urlencode(self.params(**changes))

    @property
    def column(self) -> str:
        return self.sort.removeprefix("-")

    @property
    def descending(self) -> bool:
        return self.sort.startswith("-")


def _date(text: str) -> date | None:
    try:
        return parse_date(text)
    except ValueError:
        return None


def standing(job: ProofJob, active: Mapping[int, DeadlineRow]) -> str:
    """The row's deadline mark: "at-risk" or "late" for an active job now, "missed" for one that
    finished after its deadline, else none."""
    row = active.get(job.pk)
    if row is not None:
        return "late" if row.standing.late else "at-risk" if row.standing.at_risk else ""
    finished = job.finished_at if job.state not in JOB_ACTIVE else None
    return "missed" if job.deadline and finished and finished > job.deadline else ""


def _order(query: JobsQuery, now: datetime) -> list[OrderBy]:
    """The sort's expressions, then the primary key the same way (a stable order for paging)."""
    by: dict[str, list[Any]] = {
        "job": [F("job_id")],
        "kind": [F("kind")],
        "state": [Case(*(When(state=s, then=Value(i)) for i, s in enumerate(STATE_ORDER)), default=Value(len(STATE_ORDER)))],
        "priority": [F("priority")],
        "partitions": [F("n_done"), F("num_partitions")],
        "client": [F("client__name")],
        "submitted": [F("submitted_at")],
        # An active job's total is still growing: its age now, as the page shows it ticking.
        "total": [ExpressionWrapper(Coalesce(F("finished_at"), Value(now, output_field=DateTimeField()))
                                    - F("submitted_at"), output_field=DurationField())],
    }
    exprs = [*by[query.column], F("pk")]
    return [e.desc(nulls_last=True) if query.descending else e.asc(nulls_last=True) for e in exprs]


def filtered(query: JobsQuery, active: Mapping[int, DeadlineRow], now: datetime) -> QuerySet[ProofJob]:
    """The jobs the query shows, in its order: the one job-list filter the API's GET /jobs applies
    too (engine.status.job_list). ``active``: the active jobs with a deadline against it now (the
    farm's deadlines)."""
    since = _date(query.since) if query.since else None
    wanted = JobFilter(kind=query.kind, state=query.state, client=query.client, q=query.q, deadline=query.deadline,
                       since=timezone.make_aware(datetime.combine(since, time.min)) if since is not None else None)
    jobs = with_progress(matching(wanted, active).select_related("client", "host"))
    return jobs.order_by(*_order(query, now))


def read(query: JobsQuery, farm: Farm) -> dict[str, Any]:
    """The query's page of jobs, evaluated inside the snapshot ``farm`` was read in, the active
    ones against their deadlines as the farm has them."""
    now, active = farm.now, farm.deadlines
    page = Paginator(filtered(query, active, now), PAGE_SIZE).get_page(query.page)
    rows = [{"job": job, "deadline": standing(job, active)} for job in page.object_list]
    return {"query": query, "page": page, "rows": rows, "count": page.paginator.count}


def _headers(query: JobsQuery) -> list[dict[str, Any]]:
    """Each column's header: the link that sorts by it (the other way round when it is the
    current sort, ascending first otherwise) and its arrow when it is the current sort."""
    out = []
    for column in COLUMNS:
        current = query.column == column
        flip = f"-{column}" if current and not query.descending else column
        out.append({"column": column, "href": "?" + query.encoded(sort=flip, page=1),
                    "arrow": ("▼" if query.descending else "▲") if current else "",
                    "aria": ("descending" if query.descending else "ascending") if current else "none"})
    return out


# Rows made once per content, as the pipelines' cells are (engine.console.markup): a pass over
# an open jobs page then renders only the rows that moved, and fills in an active job's total.
_MADE: dict[tuple[Any, ...], str] = {}
MADE_MAX = 5000


def _row(key: str, row: dict[str, Any], now: datetime) -> Unit:
    job: ProofJob = row["job"]
    content = (job.pk, job.job_id, job.kind, job.state, job.priority, getattr(job, "n_done", 0), job.num_partitions,
               job.client.name if job.client else None, job.submitted_at, job.finished_at, row["deadline"])
    made = _MADE.get(content)
    ticking = job.total_ms is None and job.state in JOB_ACTIVE  # engine.figures.TOTAL of a job, still growing
    if made is None:
        made = render_to_string(f"{TEMPLATE}#job-row", {
            "job": job, "deadline": row["deadline"], "version": VERSION_TOKEN, "total_text": fmt_ms(job.total_ms),
            "ticking": ticking, "submitted_ms": epoch_ms(job.submitted_at), "tick_text": TICK_MARK,
            "can_cancel": job.state in JOB_ACTIVE, "can_retry": job.state in (JobState.FAILED, JobState.CANCELLED),
        }).strip()
        if len(_MADE) >= MADE_MAX:
            _MADE.clear()
        _MADE[content] = made
    html = made.replace(TICK_MARK, ticking_text(job.submitted_at, now), 1) if ticking else made
    return unit(f"{key}/{job.pk}", html)


def _pages(query: JobsQuery, page: Page[ProofJob]) -> dict[str, str]:
    return {
        "previous": "?" + query.encoded(page=page.previous_page_number()) if page.has_previous() else "",
        "next": "?" + query.encoded(page=page.next_page_number()) if page.has_next() else "",
    }


ROW_MARK = "\x02row {}\x02"  # where each row goes in the section's skeleton


def jobs_units(fragment: Fragment, context: dict[str, Any], now: datetime) -> list[Unit]:
    """The section (its shape: which rows in which order, the count, headers and page links)
    and a unit per row."""
    key = fragment.name
    query: JobsQuery = context["query"]
    page: Page[ProofJob] = context["page"]
    rows = [_row(key, row, now) for row in context["rows"]]
    skeleton = render_to_string(f"{TEMPLATE}#jobs-table", {
        "dom_id": fragment.dom_id, "version": VERSION_TOKEN, "query": query, "page": page,
        "count": context["count"], "headers": _headers(query), "pages": _pages(query, page),
        "rows": [ROW_MARK.format(i) for i in range(len(rows))],
    }).strip()
    html = skeleton
    for i, row in enumerate(rows):
        html = html.replace(ROW_MARK.format(i), row.html or "", 1)
    shape = digest(repr((skeleton, [r.key for r in rows])))
    return [Unit(key, html, shape, tuple(r.key for r in rows)), *rows]
