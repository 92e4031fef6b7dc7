"""One name, one number: a job of each kind is proved by the real engine (one of them failed
first and was retried by its operator), then every figure of it is read from the job page, the
jobs page, the API, the engines' log lines, /metrics, /history/, /api/v1/stats and /capacity/,
and each name means one number wherever it is read: to the millisecond where the figure is
given whole, or as the page rounds it (engine.figures holds the one definition of each)."""

from __future__ import annotations

import re
import time
from collections import defaultdict
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from engine.circuits.kinds import demo_inputs
from engine.figures import PHASES, TOTAL, p50, p95
from engine.format import fmt_bytes, fmt_ms
from engine.ledger.tokens import issue_token
from engine.ledger.writer import StatusWriter, Transition
from engine.models import EngineHost, JobLogLine, ProofJob
from engine.states import PartitionState
from tests.engine.conftest import engine_params, start_engine  # noqa: F401  the engine's fixtures

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BUILT_IN = ("winning-post", "window-post", "porep-c2", "snap-update")
RETRIED = "fig-winning-post"
SNARKJS = Path(__file__).resolve().parents[1] / "fixtures" / "snarkjs" / "bn128"
ROW_FIGURES = [f.name for f in (*PHASES, TOTAL)]


# ---- reading the pages --------------------------------------------------------------------


class Rows(HTMLParser):
    """A job page's partition rows: for each partition, its current attempt's figures and each
    kept attempt's, by figure name, in milliseconds (data-figure, data-ms)."""

    def __init__(self) -> None:
        super().__init__()
        self.current: dict[int, dict[str, int | None]] = {}
        self.kept: dict[int, list[dict[str, int | None]]] = defaultdict(list)
        self.head: dict[str, int | None] = {}
        self._row: dict[str, int | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("data-partition"):
            self._row = self.current.setdefault(int(str(a["data-partition"]).rsplit("#", 1)[1]), {})
        elif a.get("data-partition-attempt"):
            self._row = {}
            self.kept[int(str(a["data-partition-attempt"]).rsplit("#", 1)[1])].append(self._row)
        elif a.get("id") == "job-detail-head":
            self._row = self.head
        if tag == "span" and a.get("data-figure") and self._row is not None:  # not the legend's <dt>
            ms = a.get("data-ms")
            self._row[str(a["data-figure"])] = int(ms) if ms is not None else None


def job_page(staff: Client, job_id: str) -> Rows:
    rows = Rows()
    rows.feed(staff.get(f"/jobs/{job_id}").content.decode())
    return rows


def metrics(staff: Client) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    text = staff.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    return {s.name: {**{tuple(sorted(x.labels.items())): x.value for x in f.samples if x.name == s.name}}
            for f in text_string_to_metric_families(text) for s in f.samples}


def sample(series: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str, **labels: str) -> float:
    return series[name].get(tuple(sorted(labels.items())), 0.0)


def log_figures(job_id: str) -> list[tuple[str, str]]:
    """Every (figure name, duration) a log line about the job states, longest names first."""
    names = sorted({"job queue", "synthesis run", "launch", "finish", *ROW_FIGURES}, key=len, reverse=True)
    # alternatives longest first: "job queue 3.1s" is the job queue, never a "queue"
    pattern = re.compile(rf"\b({'|'.join(map(re.escape, names))}) (\d[\d.]*(?:ms|s)|\d+m \d\ds|\d+h \d\dm)")
    found = []
    for message in JobLogLine.objects.filter(job__job_id=job_id).order_by("pk").values_list("message", flat=True):
        found += [(m.group(1), m.group(2)) for m in pattern.finditer(message)]
    return found


# ---- the jobs -----------------------------------------------------------------------------


def submitted(api: Client) -> list[str]:
    """A job of each built-in kind through the API, and one of a registered circom circuit."""
    jobs = []
    for kind in BUILT_IN:
        response = api.post("/api/v1/jobs", {"kind": kind, "job_id": f"fig-{kind}", "inputs": demo_inputs(kind)},
                            content_type="application/json")
        assert response.status_code == 201, response.content
        jobs.append(f"fig-{kind}")
    with open(SNARKJS / "circuit.zkey", "rb") as zkey:
        registered = api.post("/api/v1/circuits", {"zkey": zkey})
    assert registered.status_code == 201, registered.content
    with open(SNARKJS / "witness.wtns", "rb") as wtns:
        response = api.post(f"/api/v1/circuits/{registered.json()['id']}/jobs", {"job_id": "fig-custom", "wtns": wtns})
    assert response.status_code == 201, response.content
    return [*jobs, "fig-custom"]


def fails_on_a_lost_host() -> None:
    """A host claims the winning-post job (critical: served first) and its device is lost: the
    job fails, as a host's failure fails it."""
    writer = StatusWriter(EngineHost.objects.create(name="lost-host"))
    [claim] = writer.claim(1)
    writer.apply(Transition(claim, PartitionState.FAILED, reason="device lost", retryable=False))
    assert ProofJob.objects.get(job_id=RETRIED).state == "failed"


def test_every_figure_of_a_job_of_each_kind_means_one_number_wherever_it_is_read(
        start_engine, staff: Client, settings, tmp_path: Path) -> None:  # noqa: F811
    settings.DATA_DIR = tmp_path
    settings.PROVINGSITE = {**settings.PROVINGSITE, "API_RATE": 0.0, "API_OPERATOR_RATE": 0.0}
    _, raw = issue_token("figures", scope="operator")
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    since = timezone.now() - timedelta(seconds=2)
    job_ids = submitted(api)
    fails_on_a_lost_host()
    time.sleep(1.2)  # a retry later than the submission: its queue counts from the retry
    engine = start_engine(synthesis=2, workers_per_device=2)
    assert api.post(f"/api/v1/jobs/{RETRIED}/retry").status_code == 200
    assert engine.run_until_idle(timeout=240)
    time.sleep(0.6)  # the job log's last lines are handed over every half second
    until = timezone.now() + timedelta(seconds=1)

    detail = {job_id: api.get(f"/api/v1/jobs/{job_id}").json() for job_id in job_ids}
    assert all(job["state"] == "done" for job in detail.values()), detail
    kinds = {job_id: job["kind"] for job_id, job in detail.items()}

    # The job page, the API, the jobs page and the log lines: every figure of every partition.
    for job_id, job in detail.items():
        page = job_page(staff, job_id)
        for part in job["partitions"]:
            for name in ROW_FIGURES:
                field = f"{'synth' if name == 'synthesis' else name}_ms"
                assert page.current[part["index"]][name] == part[field], (job_id, part["index"], name)
            assert [{n: k[n] for n in ROW_FIGURES} for k in page.kept[part["index"]]] == [
                {n: a[f"{'synth' if n == 'synthesis' else n}_ms"] for n in ROW_FIGURES} for a in part["attempts"]]
        queue_ms, total_ms = round(job["queue_secs"] * 1000), round(job["total_secs"] * 1000)
        assert (page.head["job queue"], page.head["total"]) == (queue_ms, total_ms)
        listed = staff.get("/jobs/?" + urlencode({"q": job_id})).content.decode()
        assert f'data-figure="total" data-ms="{total_ms}"' in listed
        said = log_figures(job_id)
        assert said and all(name in {"job queue", "total", "synthesis run", "launch", "finish"} for name, _ in said), said
        outcome = [value for name, value in said if name in ("job queue", "total")][-2:]  # its "job done" line
        assert outcome == [fmt_ms(queue_ms), fmt_ms(total_ms)], (job_id, said)

    # The retried job: its queue counts from the retry, and its failed attempt is kept and shown.
    retried = ProofJob.objects.get(job_id=RETRIED)
    assert retried.retried_at is not None and retried.started_at is not None
    assert detail[RETRIED]["queue_secs"] * 1000 == pytest.approx(
        (retried.started_at - retried.retried_at).total_seconds() * 1000, abs=1)
    assert detail[RETRIED]["queue_secs"] < (retried.retried_at - retried.submitted_at).total_seconds()
    (part,) = detail[RETRIED]["partitions"]
    (failed,) = part["attempts"]
    assert (failed["ended"], failed["host"], failed["reason"]) == ("failed", "lost-host", "device lost")
    assert part["attempt"] == 2 and part["queue_ms"] is not None and failed["queue_ms"] is not None

    # /metrics: each phase's histogram over a kind's partitions is the sum of the API's figures.
    series = metrics(staff)
    for job_id, job in detail.items():
        for figure in PHASES:
            field = f"{'synth' if figure.name == 'synthesis' else figure.name}_ms"
            values = [p[field] for p in job["partitions"] if p[field] is not None]
            labels = {"kind": kinds[job_id], "phase": figure.name}
            assert sample(series, "provingsite_phase_duration_seconds_count", **labels) == len(values), labels
            assert sample(series, "provingsite_phase_duration_seconds_sum", **labels) == pytest.approx(
                sum(values) / 1000, abs=len(values) * 0.001), labels
        assert sample(series, "provingsite_proof_duration_seconds_sum", kind=kinds[job_id]) == pytest.approx(
            job["total_secs"], abs=0.001)

    # /api/v1/stats, and /history/'s tables for the same range: each phase's mean, p50 and p95.
    span = {"since": since.isoformat(), "until": until.isoformat()}
    stats = api.get("/api/v1/stats?" + urlencode(span)).json()
    by_kind = {row["kind"]: row for row in stats["kinds"]}
    history_html = staff.get("/history/?" + urlencode({**span, "buckets": 30})).content.decode()
    kinds_table = history_html[history_html.index('id="history-kinds"'):history_html.index('id="history-hosts"')]
    for job_id, job in detail.items():
        row = by_kind[kinds[job_id]]
        assert (row["proofs"], row["partitions"]) == (1, len(job["partitions"]))
        cells = re.search(rf'data-kind="{kinds[job_id]}">(.*?)</tr>', kinds_table, re.S)
        assert cells is not None
        shown = re.findall(r"<td>([^<]*) / ([^<]*)</td>", cells.group(1))
        for figure, (mean, worst) in zip(PHASES, shown, strict=True):
            field = f"{'synth' if figure.name == 'synthesis' else figure.name}_ms"
            values = [p[field] for p in job["partitions"] if p[field] is not None]
            phase = row["phases"][figure.name]
            assert phase["mean_ms"] == pytest.approx(sum(values) / len(values), abs=1), (job_id, figure.name)
            assert (phase["p50_ms"], phase["p95_ms"]) == (p50(values), p95(values)), (job_id, figure.name)
            assert (mean, worst) == (fmt_ms(phase["mean_ms"]), fmt_ms(phase["p95_ms"])), (job_id, figure.name)

    # /history/'s charts are GET /api/v1/history's series for the range, bucket for bucket.
    history = api.get("/api/v1/history?" + urlencode({**span, "buckets": 30})).json()
    minutes = history["bucket_seconds"] / 60
    named = {s["name"]: s for s in history["series"]}
    # (a bucket's length is the range's share, to the microsecond)
    assert sum(named["proofs per minute"]["values"]) * minutes == pytest.approx(len(job_ids), rel=1e-4)
    assert sum(named["failures per minute"]["values"]) * minutes == pytest.approx(1, rel=1e-4)  # the retried job's
    for s in history["series"]:
        chart = history_html[history_html.index(f'aria-label="{s["name"]}"'):]
        chart = chart[:chart.index("</svg>")]
        drawn = [float(v) for v in re.findall(r'data-value="([^"]+)"', chart)]
        assert drawn == [v for v in s["values"] if v > 0], s["name"]
        assert f'data-mean="{s["mean"]:.2f}"' in chart, s["name"]

    # /capacity/ and GET /api/v1/capacity: each circuit's p50 of synthesis and finalize is the
    # p50 of its partitions' figures; device (the lock held) is within gpu; a key's bytes are
    # its console chip's; the measured job queue is the jobs' own.
    capacity = api.get("/api/v1/capacity?" + urlencode(span)).json()
    circuits = {row["circuit"]: row for row in capacity["circuits"]}
    console = staff.get("/").content.decode()
    capacity_html = staff.get("/capacity/?" + urlencode({"since": since.strftime("%Y-%m-%dT%H:%M:%S"),
                                                         "until": until.strftime("%Y-%m-%dT%H:%M:%S")})).content.decode()
    for job in detail.values():
        row = circuits[job["circuit_id"]]
        parts = job["partitions"]
        assert row["synthesis_p50_s"] * 1000 == pytest.approx(p50([p["synth_ms"] for p in parts]), abs=1)
        assert row["finalize_p50_s"] * 1000 == pytest.approx(p50([p["finalize_ms"] for p in parts]), abs=1)
        assert row["device_p50_s"] * 1000 <= p50([p["gpu_ms"] for p in parts]) + 1
        chip = re.search(rf'data-circuit="{re.escape(job["circuit_id"])}" data-state="[^"]*" data-users="\d+" '
                         rf'data-tier="hot"[^>]*><span class="chip-name">[^<]+</span> · ([^·]+) ·', console)
        assert chip is not None, job["circuit_id"]
        assert fmt_bytes(row["key_bytes"]) == chip.group(1).strip(), job["circuit_id"]
        capacity_row = re.search(rf'<tr data-circuit="{re.escape(job["circuit_id"])}">(.*?)</tr>', capacity_html, re.S)
        assert capacity_row is not None
        assert f'<td data-figure="synthesis">{fmt_ms(row["synthesis_p50_s"] * 1000)}</td>' in capacity_row.group(1)
        assert f"<td data-key-bytes>{chip.group(1).strip()}</td>" in capacity_row.group(1)
    queues = [job["queue_secs"] for job in detail.values()]
    assert capacity["measured"]["claim_wait"]["p50_s"] == pytest.approx(p50(queues), abs=0.001)
    assert capacity["measured"]["done_wait"]["p50_s"] == pytest.approx(
        p50([job["total_secs"] for job in detail.values()]), abs=0.001)
