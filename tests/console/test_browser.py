"""The console in headless Chromium against the embedded default with real proving.

`manage.py runengine --serve --demo` runs as a subprocess on a free port with its own data
directory (SQLite, in-memory channel layer, CPU backend, scale tiny). While the demo jobs
prove, the test samples the DOM and, beside it, reads the records in snapshots. The stream
swaps each worker card by itself, stamped with the version it was read at: every card whose
version was also read from the database must show exactly what the records say that worker
was proving at that version (never idle while one of its partitions is in gpu).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from tests.conftest import require_service

if TYPE_CHECKING:
    import psycopg

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# What the page says: per worker card its key, state, partitions and version; and every
# partition cell's state.
SAMPLE_JS = """() => {
  const workers = document.getElementById('frag-workers');
  const cards = [...workers.querySelectorAll('[data-worker]')].map(
      c => [c.dataset.worker, c.dataset.state, c.dataset.partition, c.dataset.version]);
  const cells = {};
  document.querySelectorAll('.cell[data-partition]').forEach(c => { cells[c.dataset.partition] = c.dataset.state; });
  const ticks = [...document.querySelectorAll('#frag-hosts .tick[data-started-at]')].map(t => t.textContent);
  const stamps = [...document.querySelectorAll('[data-version]')].map(e => e.dataset.version);
  return {cards, cells, ticks, stamps, live: document.body.classList.contains('live')};
}"""

# On every animation frame, every panel against every other: each card and cell carries its
# state in its class, its data-state and (cards) its text at once; cards vs cells; pipeline
# heads ("k/n done", job state) vs their cells; the counters per kind vs the pipelines; the
# pending and reserving figures vs the cells; synthesis active vs cells and ≤ its max; memory
# owners and key chips vs the claimed cells; gauges ≤ 100 %; ticking durations never going back.
FRAME_WATCH_JS = """() => {
  window.__frames = 0; window.__torn = []; window.__checks = {};
  const torn = (...what) => { if (window.__torn.length < 20) window.__torn.push(what); };
  const seen = (name) => { window.__checks[name] = (window.__checks[name] || 0) + 1; };
  const HOLDING = new Set(['synthesizing', 'synth_done', 'gpu', 'finalizing']);
  const CLAIMED = new Set(['reserving', ...HOLDING]);
  const ticks = new Map();
  const ms = (text) => {
    let m = /^(\\d+)ms/.exec(text); if (m) return Number(m[1]);
    m = /^([\\d.]+)s/.exec(text); if (m) return Number(m[1]) * 1000;
    m = /^(\\d+)m (\\d+)s/.exec(text); if (m) return (Number(m[1]) * 60 + Number(m[2])) * 1000;
    m = /^(\\d+)h (\\d+)m/.exec(text); if (m) return (Number(m[1]) * 60 + Number(m[2])) * 60000;
    return null;
  };
  const check = () => {
    window.__frames++;
    document.querySelectorAll('#frag-workers [data-worker], .cell[data-partition]').forEach(el => {
      const state = el.dataset.state;
      const proving = el.dataset.worker !== undefined && /proving P\\d+/.test(el.textContent);
      if (!el.classList.contains(state) || (el.dataset.worker !== undefined && proving !== (state === 'proving'))) {
        torn('class', el.id, el.className, state, el.textContent.slice(0, 60));
      }
    });
    const cells = {};
    const byState = {};
    document.querySelectorAll('.cell[data-partition]').forEach(c => {
      cells[c.dataset.partition] = c.dataset.state;
      byState[c.dataset.state] = (byState[c.dataset.state] || 0) + 1;
    });
    // cards vs cells
    const proving = new Set();
    document.querySelectorAll('#frag-workers [data-worker][data-state="proving"]').forEach(card => {
      card.dataset.partition.split(' ').filter(Boolean).forEach(p => {
        proving.add(p);
        if (p in cells && cells[p] !== 'gpu') torn('card', p, cells[p]);
      });
    });
    Object.entries(cells).forEach(([p, state]) => { if (state === 'gpu' && !proving.has(p)) torn('cell', p, 'no card'); });
    // pipeline heads vs their cells; a queued job has no claimed cell
    const pipes = [...document.querySelectorAll('#frag-pipelines .pipeline[data-job]')].map(pipe => {
      const head = pipe.querySelector('.pipeline-head');
      const states = [...pipe.querySelectorAll('.cell[data-partition]')].map(c => c.dataset.state);
      const job = {id: pipe.dataset.job, kind: head.dataset.kind, state: head.dataset.jobState, states};
      const done = states.filter(s => s === 'done').length;
      if (Number(head.dataset.done) !== done || Number(head.dataset.total) !== states.length) {
        torn('head', job.id, head.dataset.done + '/' + head.dataset.total, done + '/' + states.length);
      }
      if (job.state === 'queued' && states.some(s => s !== 'pending')) torn('queued', job.id, states.join(','));
      seen('heads');
      return job;
    });
    // counters per kind (and all) vs the pipelines
    document.querySelectorAll('#frag-counters tr[data-kind]').forEach(row => {
      ['queued', 'running'].forEach(state => {
        const shown = Number(row.querySelector('td[data-state="' + state + '"]').textContent);
        const kind = row.dataset.kind;
        const piped = pipes.filter(p => p.state === state && (kind === 'all' || p.kind === kind)).length;
        if (shown !== piped) torn('counter', kind, state, shown, piped);
      });
      seen('counters');
    });
    // pending and reserving figures vs cells
    const pending = byState.pending || 0;
    document.querySelectorAll('[data-synthesis-pending], [data-pending-partitions]').forEach(el => {
      if (Number(el.textContent) !== pending) torn('pending', el.outerHTML.slice(0, 50), el.textContent, pending);
      seen('pending');
    });
    // synthesis active vs cells, and within its max
    const active = document.querySelector('[data-synthesis-active]');
    const most = document.querySelector('[data-synthesis-max]');
    if (active && Number(active.textContent) !== (byState.synthesizing || 0)) {
      torn('synthesis', active.textContent, byState.synthesizing || 0);
    }
    if (active && most && Number(active.textContent) > Number(most.textContent)) {
      torn('synthesis-max', active.textContent, most.textContent);
    }
    // memory owners vs the jobs holding memory, both ways (one host: the embedded default)
    const holders = new Set(pipes.filter(p => p.states.some(s => HOLDING.has(s))).map(p => p.kind + ' ' + p.id));
    // a job's segments only: keys and the engine's own reservations are no partition's
    const owners = new Set([...document.querySelectorAll('#frag-memory .gauge-row[data-host] .seg[data-holder="job"]')]
        .map(seg => seg.dataset.owner));
    owners.forEach(o => { if (!holders.has(o)) torn('memory-owner', o, 'holds no partition'); });
    holders.forEach(h => { if (!owners.has(h)) torn('memory-holder', h, 'not in the memory panel'); });
    seen('memory');
    // key chips: in use exactly while a claimed cell of its kind is on the page
    document.querySelectorAll('#frag-keys .chip[data-circuit]').forEach(chip => {
      const kind = chip.dataset.circuit.split('/')[0];
      const users = pipes.filter(p => p.kind === kind).reduce((n, p) => n + p.states.filter(s => CLAIMED.has(s)).length, 0);
      if (Number(chip.dataset.users) !== users || (chip.dataset.state === 'in use') !== (users > 0)) {
        torn('key', chip.dataset.circuit, chip.dataset.state, chip.dataset.users, users);
      }
      seen('keys');
    });
    // gauges within 100 %
    document.querySelectorAll('.gauge .fill, .gauge .seg').forEach(el => {
      if (parseFloat(el.style.width) > 100.05) torn('gauge', el.parentElement.className, el.style.width);
    });
    const total = [...document.querySelectorAll('#frag-memory .gauge.split')].map(
        g => [...g.querySelectorAll('.seg')].reduce((n, s) => n + parseFloat(s.style.width), 0));
    total.forEach(t => { if (t > 100.05) torn('gauge-split', t); });
    // ticking durations never go back
    document.querySelectorAll('[data-started-at]').forEach(el => {
      const key = (el.closest('[id]') || {}).id + '|' + el.dataset.startedAt + '|' + (el.dataset.suffix || '');
      const now = ms(el.textContent);
      if (now === null) return;
      const before = ticks.get(key);
      if (before !== undefined && now < before) torn('tick', key, before, now);
      ticks.set(key, Math.max(now, before || 0));
    });
    requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
}"""

GPU_NOW = """
SELECT h.name || '/' || w.device || '/W' || w.ordinal, j.job_id || '#' || p."index"
FROM engine_partition p JOIN engine_worker w ON p.worker_id = w.id JOIN engine_enginehost h ON w.host_id = h.id
JOIN engine_proofjob j ON p.job_id = j.id WHERE p.state = 'gpu'
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, server: subprocess.Popen[str], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"runengine exited early: {server.stdout.read() if server.stdout else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("runengine did not start listening")


class Read(Protocol):
    """A query in the snapshot, its ``?`` placeholders bound to ``params``: its rows."""

    def __call__(self, query: str, params: Sequence[Any] = (), /) -> list[tuple[Any, ...]]: ...


@dataclass(frozen=True)
class Records:
    """Where the server under test keeps its records: a SQLite file, or a PostgreSQL database
    made for the test. Reads run in read-only snapshots of their own."""

    sqlite: Path | None = None
    postgres: str | None = None

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Read]:
        db: sqlite3.Connection | psycopg.Connection[tuple[Any, ...]]
        if self.sqlite is not None:
            db = sqlite3.connect(f"file:{self.sqlite}?mode=ro", uri=True, isolation_level=None, timeout=5)
            begin, mark = "BEGIN", "?"
        else:
            import psycopg

            assert self.postgres is not None, "the records are in a SQLite file or a PostgreSQL database"
            db = psycopg.connect(self.postgres, autocommit=True)
            begin, mark = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "%s"

        def read(query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
            return list(db.execute(query.replace("?", mark), tuple(params)).fetchall())

        try:
            db.execute(begin)
            yield read
            db.execute("COMMIT")
        finally:
            db.close()


class RecordsPoller(threading.Thread):
    """Reads (version, proving workers) from the records in read snapshots, as often as it can."""

    def __init__(self, records: Records) -> None:
        super().__init__(daemon=True)
        self.records = records
        self.states: dict[int, frozenset[tuple[str, str]]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with self.records.snapshot() as read:
                    row = read("SELECT coalesce(sum(value), 0) FROM engine_statusclock")  # the farm's version
                    proving = frozenset(tuple(r) for r in read(GPU_NOW))
            except sqlite3.OperationalError:
                continue
            if row:
                self.states[int(row[0][0])] = proving
            time.sleep(0.01)


@contextlib.contextmanager
def records_for(database: str, tmp_path: Path) -> Iterator[Records]:
    """A SQLite file in tmp_path, or a fresh PostgreSQL database dropped afterwards."""
    if database == "sqlite":
        yield Records(sqlite=tmp_path / "provingsite.sqlite3")
        return
    from tests.farm.harness import admin_execute, db_url, drop_database, postgres_available

    reachable, reason = postgres_available()
    require_service(reachable, reason)
    from psycopg import sql

    name = f"browser_{os.getpid()}_{int(time.time() * 1000) % 10**9}"
    admin_execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield Records(postgres=db_url(name))
    finally:
        drop_database(name)


@pytest.fixture
def embedded_server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    with records_for(getattr(request, "param", "sqlite"), tmp_path) as records:
        yield from _serve(tmp_path, records)


def _serve(tmp_path: Path, records: Records) -> Iterator[dict[str, Any]]:
    env = {**os.environ, "PROVINGSITE_DATA_DIR": str(tmp_path), "PROVINGSITE_DEVICES": "cpu",
           "PROVINGSITE_SCALE": "tiny", "DJANGO_SETTINGS_MODULE": "provingsite.settings"}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    if records.postgres:
        env["DATABASE_URL"] = records.postgres
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--verbosity", "0"], env=env, cwd=ROOT, check=True, timeout=120)
    login = subprocess.run([*manage, "shell", "-c", (
        "from django.contrib.auth import get_user_model\n"
        "from django.contrib.sessions.backends.db import SessionStore\n"
        "u = get_user_model().objects.create_user('browser', password='browser-test-pw', is_staff=True)\n"
        "s = SessionStore(); s['_auth_user_id'] = str(u.pk)\n"
        "s['_auth_user_backend'] = 'django.contrib.auth.backends.ModelBackend'\n"
        "s['_auth_user_hash'] = u.get_session_auth_hash(); s.create(); print(s.session_key)")],
        env=env, cwd=ROOT, check=True, timeout=120, capture_output=True, text=True)
    port = free_port()
    # The stress test's load: eight jobs of every kind at once.
    server = subprocess.Popen([*manage, "runengine", "--serve", "--demo", "--demo-per-kind", "8",
                               "--host", "127.0.0.1", "--port", str(port)],
                              env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_port(port, server)
        # Read the server's log as it comes: a pipe nobody reads fills up (64 KiB) and then every
        # engine thread that logs a line blocks on it, the proving with them.
        assert server.stdout is not None
        threading.Thread(target=server.stdout.read, name="server-log", daemon=True).start()
        yield {"url": f"http://127.0.0.1:{port}/", "session": login.stdout.strip().splitlines()[-1],
               "records": records, "manage": manage, "env": env}
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@contextlib.contextmanager
def signed_in_page(server: dict[str, Any], path: str = "") -> Iterator[Any]:
    """A Chromium page, signed in as the staff user the fixture made, opened at ``path``."""
    require_service(Path(CHROMIUM).exists(), "Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            context.add_cookies([{"name": "sessionid", "value": server["session"], "url": server["url"]}])
            page = context.new_page()
            page.goto(server["url"] + path)
            yield page
        finally:
            browser.close()


# Cancel the running jobs with the most unfinished cells, as an operator does from the
# console (its cancel form's POST, with the page's CSRF token).
CANCEL_JS = """async (n) => {
  const token = document.querySelector('input[name=csrfmiddlewaretoken]').value;
  const running = [...document.querySelectorAll('#frag-pipelines .pipeline[data-job]')]
      .filter(p => p.querySelector('.pipeline-head').dataset.jobState === 'running')
      .sort((a, b) => b.querySelectorAll('.cell:not(.done)').length - a.querySelectorAll('.cell:not(.done)').length);
  const asked = [];
  for (const p of running.slice(0, n)) {
    const body = new URLSearchParams({csrfmiddlewaretoken: token, next: '/'});
    await fetch('/jobs/' + encodeURIComponent(p.dataset.job) + '/cancel', {method: 'POST', body, redirect: 'manual'});
    asked.push(p.dataset.job);
  }
  return asked;
}"""


def cancelled_jobs(server: dict[str, Any], job_ids: list[str]) -> list[str]:
    with server["records"].snapshot() as read:
        return [row[0] for row in read(
            f"SELECT job_id FROM engine_proofjob WHERE state = 'cancelled' AND job_id IN ({','.join('?' * len(job_ids))})",
            job_ids)]


WATCH_SECONDS = 30


# The same on the embedded default and on PostgreSQL: the snapshot rules differ between them.
@pytest.mark.parametrize("embedded_server", ["sqlite", "postgresql"], indirect=True)
def test_the_console_goes_live_and_agrees_with_the_records(embedded_server: dict[str, Any]) -> None:
    poller = RecordsPoller(embedded_server["records"])
    samples: list[dict[str, Any]] = []
    cancelled: list[str] = []
    with signed_in_page(embedded_server) as page:
        poller.start()
        try:
            page.wait_for_function("document.body.classList.contains('live')", timeout=30_000)
            page.evaluate(FRAME_WATCH_JS)
            started = time.monotonic()
            deadline = started + 120
            screenshot_taken = False
            while time.monotonic() < deadline:
                samples.append(page.evaluate(SAMPLE_JS))
                if not screenshot_taken and any(card[1] == "proving" for card in samples[-1]["cards"]):
                    shoot(page)
                    screenshot_taken = True
                if len(cancelled) < 2 and time.monotonic() - started > 5:
                    asked = page.evaluate(CANCEL_JS, 2 - len(cancelled))
                    cancelled += cancelled_jobs(embedded_server, asked) if asked else []
                watched = time.monotonic() - started >= WATCH_SECONDS
                if watched and screenshot_taken and seen_enough(samples, poller):
                    break
                time.sleep(0.1)
            frames, torn, checks = page.evaluate("() => [window.__frames, window.__torn, window.__checks]")
            if not screenshot_taken:
                shoot(page)
        finally:
            poller.stop.set()
            poller.join(5)

    assert all(s["live"] for s in samples), "the stream dropped during the run"
    assert frames > 100, f"only {frames} animation frames were watched"
    assert not torn, f"the page contradicted itself on an animation frame: {torn[:3]}"
    assert len(cancelled) == 2, f"two running jobs should have been cancelled mid-run, got {cancelled}"
    for panel in ("heads", "counters", "pending", "memory", "keys"):
        assert checks.get(panel), f"no frame had {panel} to check: {checks}"
    inexact = [v for s in samples for v in s["stamps"] if v.endswith("+")]
    assert not inexact, f"frames carried inexact stamps: {inexact[:3]}"
    first_cells = samples[0]["cells"]
    assert any(s["cells"].get(p) not in (None, state) for s in samples for p, state in first_cells.items()), \
        "no partition cell changed state without a reload"
    assert worker_went_proving_then_idle(samples), "no worker card showed proving and then idle"
    assert len({tuple(s["ticks"]) for s in samples}) > 1, "durations did not tick"
    compared, mismatches = compare_with_records(samples, poller.states)
    assert not mismatches, f"DOM and records disagree at these versions: {mismatches[:3]}"
    assert compared >= 3, f"only {compared} worker cards could be compared with a read at the same version"


def shoot(page: Any, name: str = "console.png", *, full_page: bool = True) -> None:
    artifacts = ROOT / "artifacts"
    artifacts.mkdir(exist_ok=True)
    page.screenshot(path=str(artifacts / name), full_page=full_page)
    # The README's screenshots are refreshed on request only, so a test run leaves the tree clean.
    if os.environ.get("PROVINGSITE_REFRESH_SCREENSHOT") == "1":
        shutil.copyfile(artifacts / name, ROOT / "docs" / name)


def worker_went_proving_then_idle(samples: list[dict[str, Any]]) -> bool:
    proving_seen: set[str] = set()
    for sample in samples:
        for key, state, *_ in sample["cards"]:
            if state == "proving":
                proving_seen.add(key)
            elif key in proving_seen:
                return True
    return False


def compare_with_records(samples: list[dict[str, Any]],
                         states: dict[int, frozenset[tuple[str, str]]]) -> tuple[int, list[Any]]:
    """Each card against the records at the card's own version; a card that says idle while
    it names a partition is wrong at any version."""
    compared, mismatches = 0, []
    for sample in samples:
        for key, state, parts, version in sample["cards"]:
            if state == "idle" and parts:
                mismatches.append((version, key, state, parts))
            if not str(version).isdigit() or int(version) not in states:
                continue
            dom = frozenset(parts.split()) if state == "proving" else frozenset()
            records = frozenset(part for worker, part in states[int(version)] if worker == key)
            compared += 1
            if dom != records:
                mismatches.append((version, key, sorted(dom), sorted(records)))
    return compared, mismatches


def seen_enough(samples: list[dict[str, Any]], poller: RecordsPoller) -> bool:
    return (len(samples) > 20 and worker_went_proving_then_idle(samples)
            and compare_with_records(samples, dict(poller.states))[0] >= 10)


# What the job page says: its head's state and links, each row's state, the ticking durations,
# and whether the page is still the one first loaded (a reload would drop the marker).
JOB_PAGE_JS = """() => {
  const head = document.getElementById('job-detail-head');
  return {state: head ? head.dataset.state : null, kind: head ? head.querySelector('.kind').textContent : null, links: head ? head.querySelector('.links').innerHTML : '',
          rows: [...document.querySelectorAll('#frag-job .prow[data-partition]')].map(r => r.dataset.state),
          ticks: [...document.querySelectorAll('#frag-job [data-started-at]')].map(t => t.textContent),
          log: [...document.querySelectorAll('#job-log .log-line .msg')].map(m => m.textContent),
          bars: document.querySelectorAll('#job-timeline rect').length,
          buttons: [...document.querySelectorAll('.job-actions form')].filter(f => getComputedStyle(f).display !== 'none')
            .map(f => f.querySelector('button').textContent),
          same_page: window.__firstLoad === true, live: document.body.classList.contains('live')};
}"""

JOB_DONE_LOGGED_JS = """() => [...document.querySelectorAll('#job-log .log-line .msg')].some(
    m => m.textContent.startsWith('job done'))"""

# The job the engine will serve last (claim order reversed), so it is still queued when the
# page, opened after Chromium starts on a loaded machine, first goes live.
LAST_QUEUED = """
SELECT job_id FROM engine_proofjob WHERE state IN ('queued', 'running')
ORDER BY state = 'queued' DESC, priority DESC, submitted_at DESC, id DESC LIMIT 1
"""


def test_the_job_page_goes_live_and_shows_the_proof_links_when_done_without_a_reload(
        embedded_server: dict[str, Any]) -> None:
    from urllib.parse import quote

    with embedded_server["records"].snapshot() as read:
        row = (read(LAST_QUEUED) or [None])[0]
    assert row, "the demo jobs were all proved before the page could be opened"
    samples: list[dict[str, Any]] = []
    with signed_in_page(embedded_server, f"jobs/{quote(row[0])}") as page:
        page.wait_for_function("document.body.classList.contains('live')", timeout=30_000)
        page.evaluate("() => { window.__firstLoad = true; }")
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            samples.append(page.evaluate(JOB_PAGE_JS))
            if samples[-1]["state"] in ("done", "failed"):
                break
            time.sleep(0.1)
        # The engine's lines about the job arrive in its log section too, the last ("job done")
        # a flush of the job log after the job's own record.
        with contextlib.suppress(Exception):
            page.wait_for_function(JOB_DONE_LOGGED_JS, timeout=15_000)
        logged = page.evaluate(JOB_PAGE_JS)["log"]
        shoot(page, "job.png")

    final = samples[-1]
    assert final["state"] == "done", f"the job page never showed the job done: {final}"
    assert final["same_page"] and all(s["live"] for s in samples), "the page reloaded or the stream dropped"
    assert set(final["rows"]) == {"done"} and "snarkjs.json" in final["links"] and "proofs.json" in final["links"]
    assert any(s["state"] != "done" for s in samples), "the job was never seen before it was done"
    # its buttons follow its state: cancel while it may be stopped, neither once it is proved
    assert all(s["buttons"] == ["cancel"] for s in samples if s["state"] in ("queued", "running")), samples
    assert final["buttons"] == [], f"a proved job still offers {final['buttons']}"
    assert final["bars"] >= len(final["rows"]), f"the timeline drew {final['bars']} bars for {len(final['rows'])} partitions"
    assert "snarkjs.json" not in samples[0]["links"]
    assert any(line.startswith("claimed P") for line in logged), f"the job page showed no claim in its log: {logged}"
    assert any(line.startswith("proved P") for line in logged), logged
    assert logged and logged[-1].startswith(f"job done {final['kind']} {row[0]}"), logged


JOBS_ROWS_JS = """() => [...document.querySelectorAll('#frag-jobs [role="row"][id^="job-row-"]')].map(
    tr => ({id: tr.dataset.job, kind: tr.dataset.kind, state: tr.dataset.state}))"""


def test_the_jobs_page_lists_the_demo_jobs_and_narrows_them_by_kind(embedded_server: dict[str, Any]) -> None:
    with signed_in_page(embedded_server, "jobs/") as page:
        every = page.evaluate(JOBS_ROWS_JS)
        assert len({r["kind"] for r in every}) > 1, f"the jobs page did not list the demo jobs of every kind: {every}"
        page.wait_for_function("document.body.classList.contains('live')", timeout=30_000)
        shoot(page, "jobs.png", full_page=False)
        asked = ask_to_cancel_and_decline(page)
        page.select_option("#jobs-page select[name=kind]", "window-post")
        with page.expect_navigation():
            page.click("#jobs-page form.filters button[type=submit]")
        narrowed = page.evaluate(JOBS_ROWS_JS)
        assert "kind=window-post" in page.url
    assert narrowed and {r["kind"] for r in narrowed} == {"window-post"}, f"the kind filter let through {narrowed}"
    if asked is not None:
        job_id, question = asked
        assert question.startswith(f"Cancel {job_id}?"), question
        with embedded_server["records"].snapshot() as read:
            (state,) = read("SELECT state FROM engine_proofjob WHERE job_id = ?", [job_id])[0]
        assert state != "cancelled", "declining the confirmation cancelled the job anyway"


def ask_to_cancel_and_decline(page: Any) -> tuple[str, str] | None:
    """Press a job's cancel and decline the question; (job id, question), or None when every
    job had finished before the page could ask."""
    button = page.query_selector("#frag-jobs [role=row] button[data-confirm]")
    if button is None:
        return None
    job_id = button.evaluate("b => b.closest('[data-job]').dataset.job")
    questions: list[str] = []

    def decline(dialog: Any) -> None:
        questions.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", decline)
    button.click()
    page.wait_for_timeout(300)  # a submission would have navigated by now
    assert questions, "cancel did not ask first"
    return job_id, questions[0]


DONE_SPANS = """SELECT started_at, finished_at FROM engine_proofjob
WHERE kind = 'snap-update' AND state = 'done' AND started_at IS NOT NULL"""

DEADLINE_JS = """job => {
  const head = [...document.querySelectorAll('[data-deadline-state]')]
    .find(e => (e.id || '').includes(job) || (e.dataset.job || '') === job || e.textContent.includes(job));
  const span = head && head.querySelector('.deadline');
  if (!span) return null;
  span.scrollIntoView({block: 'center'});  // so a viewport's screenshot shows it
  return span.className.replace('deadline', '').trim();
}"""


def test_the_console_and_the_job_page_mark_a_job_at_risk_and_then_late(embedded_server: dict[str, Any]) -> None:
    from datetime import UTC, datetime, timedelta
    from urllib.parse import quote

    def expected_seconds() -> float:  # what the farm expects of a snap-update job: its p95 as the server reads it
        with embedded_server["records"].snapshot() as read:
            spans = [(_when(b) - _when(a)).total_seconds() for a, b in read(DONE_SPANS)]
        return sorted(spans)[max(0, -(-len(spans) * 95 // 100) - 1)] if spans else 0.0

    deadline_ok = time.monotonic() + 150
    while expected_seconds() < 0.5 and time.monotonic() < deadline_ok:
        time.sleep(0.5)
    expected = expected_seconds()
    assert expected >= 0.5, "no snap-update job was proved to give the farm an expected duration"
    seen: dict[str, set[str]] = {"console": set(), "job": set()}
    with signed_in_page(embedded_server) as console:
        # The operator drains the engine's host first, so the job waits in the queue through its
        # deadline whatever the machine's speed (a free engine proved it before it was due, and a
        # finished job is never late).
        drain_from_the_console(embedded_server, console)
        # Due in 8 s plus the expected duration: on time now, at risk 8 s from now, late once it
        # passes. The console is open before the job is submitted (opening a page on a loaded
        # machine took longer than 5 s), and the job's page opens while it is still on time.
        due = datetime.now(UTC) + timedelta(seconds=8 + expected)
        submitjob(embedded_server, "snap-update", "due-soon", "--priority", "low", "--sector-seed", "ab" * 32,
                  "--randomness", "cd" * 32, "--data-seed", "ef" * 32, "--deadline", due.isoformat())
        job_page = console.context.new_page()
        job_page.goto(embedded_server["url"] + f"jobs/{quote('due-soon')}")
        stop = time.monotonic() + 8 + expected + 20
        while time.monotonic() < stop and not ("late" in seen["console"] and "late" in seen["job"]):
            for name, page in (("console", console), ("job", job_page)):
                state = page.evaluate(DEADLINE_JS, "due-soon")
                if state and state not in seen[name]:
                    seen[name].add(state)
                    # the viewport only: a full page under load takes longer than a job is at risk
                    shoot(page, f"deadline-{name}-{state}.png", full_page=False)
            time.sleep(0.05)
    # Each page shows the job late; its at-risk stretch (as long as the farm's expected duration,
    # under a second on a quiet machine) is caught on at least one of them while a loaded machine
    # loads the other.
    assert all("late" in seen[name] for name in seen), f"the pages showed {seen} for a job due soon"
    assert any("at-risk" in seen[name] for name in seen), f"neither page showed the job at risk: {seen}"


def drain_from_the_console(server: dict[str, Any], console: Any) -> None:
    """Drain the server's one engine host as an operator does (the hosts panel's action page and its
    confirm button), then wait for two of its heartbeats: it re-reads the flag at each."""
    from urllib.parse import quote

    def host() -> tuple[str, Any, bool]:
        with server["records"].snapshot() as read:
            name, beat, draining = read("SELECT name, heartbeat_at, draining FROM engine_enginehost")[0]
        return name, beat, bool(draining)

    name, _, _ = host()
    page = console.context.new_page()
    page.goto(server["url"] + f"hosts/{quote(name)}/drain")
    page.get_by_role("button", name=f"drain {name}").click()
    page.wait_for_url(server["url"])
    page.close()
    beats: set[Any] = set()
    deadline = time.monotonic() + 60
    while len(beats) < 3 and time.monotonic() < deadline:
        _, beat, draining = host()
        if draining:
            beats.add(beat)
        time.sleep(0.1)
    assert len(beats) >= 3, f"host {name} was not seen draining through two heartbeats"


def _when(value: Any) -> Any:
    from datetime import UTC, datetime

    if isinstance(value, datetime):
        return value
    moment = datetime.fromisoformat(str(value))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def submitjob(server: dict[str, Any], *args: str) -> None:
    """``manage.py submitjob …`` against the server's records, as a client's job arrives (the
    ledger's one way in), from a process of its own beside the server."""
    done = subprocess.run([*server["manage"], "submitjob", *args], env=server["env"], cwd=ROOT, timeout=120,
                          capture_output=True, text=True)
    assert done.returncode == 0, f"submitjob failed: {done.stdout}{done.stderr}"


def submit_through_the_ledger(server: dict[str, Any], job_id: str) -> None:
    """A low-priority winning-post: behind the demo's jobs, still queued when cancelled."""
    submitjob(server, "winning-post", job_id, "--sector-seed", "11" * 32, "--randomness", "22" * 32, "--priority", "low")


def job_states(server: dict[str, Any], job_ids: list[str]) -> dict[str, str]:
    with server["records"].snapshot() as read:
        return dict(read(f"SELECT job_id, state FROM engine_proofjob WHERE job_id IN ({','.join('?' * len(job_ids))})",
                         job_ids))


# One job's cancel as another tab posts it (its form's POST, with the page's CSRF token).
CANCEL_ONE_JS = """async (jobId) => {
  const token = document.querySelector('#jobs-actions input[name=csrfmiddlewaretoken]').value;
  const body = new URLSearchParams({csrfmiddlewaretoken: token, next: '/jobs/'});
  const answer = await fetch('/jobs/' + encodeURIComponent(jobId) + '/cancel', {method: 'POST', body, redirect: 'manual'});
  return answer.type === 'opaqueredirect' ? 'redirected' : answer.status;
}"""


# Tick the rows of two queued snap-update jobs (served last: still queued when the page asks).
PICK_JS = """() => {
  const picked = [...document.querySelectorAll('#frag-jobs [role=row][data-kind="snap-update"][data-state="queued"]')]
      .slice(-2).map(tr => tr.dataset.job);
  picked.forEach(id => document.querySelector('#frag-jobs input[name="job"][value="' + CSS.escape(id) + '"]').click());
  return picked;
}"""


# The same on the embedded default and on PostgreSQL: the table's read (its sorts included) runs on both.
@pytest.mark.parametrize("embedded_server", ["sqlite", "postgresql"], indirect=True)
def test_the_jobs_page_updates_live_and_its_bulk_cancel_asks_first(embedded_server: dict[str, Any]) -> None:
    with signed_in_page(embedded_server, "jobs/") as page:
        page.wait_for_function("document.body.classList.contains('live')", timeout=30_000)
        page.evaluate("() => { window.__firstLoad = true; }")
        shown = {r["id"] for r in page.evaluate(JOBS_ROWS_JS)}
        assert "arrived-live" not in shown

        # A job submitted while the page is open appears on it without a reload; the demo's
        # jobs move on it as they are proved, and a cancel made elsewhere (another operator's
        # tab: the single-job action, through the ledger) shows on the new job's row.
        before = {r["id"]: r["state"] for r in page.evaluate(JOBS_ROWS_JS)}
        submit_through_the_ledger(embedded_server, "arrived-live")
        row = "#frag-jobs [role=row][data-job='arrived-live']"
        page.wait_for_selector(row, timeout=30_000)
        assert page.get_attribute(row, "data-state") in ("queued", "running", "done")
        page.wait_for_function("""(before) => [...document.querySelectorAll('#frag-jobs [role=row][data-job]')].some(
            tr => tr.dataset.job in before && before[tr.dataset.job] !== tr.dataset.state)""", arg=before,
                               timeout=90_000)
        assert job_states(embedded_server, ["arrived-live"]) == {"arrived-live": "queued"}
        answered = page.evaluate(CANCEL_ONE_JS, "arrived-live")
        recorded = job_states(embedded_server, ["arrived-live"])
        assert recorded == {"arrived-live": "cancelled"}, f"the cancel was not recorded ({answered}): {recorded}"
        deadline = time.monotonic() + 30
        while page.get_attribute(row, "data-state") != "cancelled" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert page.get_attribute(row, "data-state") == "cancelled", page.evaluate(
            "() => [document.getElementById('server-clock').outerHTML, document.body.className,"
            " document.querySelector(\"#frag-jobs [data-job='arrived-live']\").outerHTML]")
        assert page.evaluate("() => window.__firstLoad === true"), "the page reloaded"

        # Bulk cancel: the selection survives the stream's swaps, and the question names how many.
        picked = page.evaluate(PICK_JS)
        assert len(picked) == 2, f"no two queued snap-update jobs left to cancel: {page.evaluate(JOBS_ROWS_JS)}"
        page.wait_for_timeout(1500)  # a few flushes swap rows meanwhile
        assert page.evaluate("() => document.querySelectorAll('#frag-jobs input[name=job]:checked').length") == 2
        questions: list[str] = []

        def answer(accept: bool) -> Any:
            def handle(dialog: Any) -> None:
                questions.append(dialog.message)
                dialog.accept() if accept else dialog.dismiss()
            return handle

        page.once("dialog", answer(False))
        page.click("button[data-bulk='cancel']")
        page.wait_for_timeout(500)  # a submission would have navigated by now
        assert questions and questions[0].startswith("Cancel 2 selected jobs?"), questions
        assert page.evaluate("() => window.__firstLoad === true"), "declining still posted the form"
        assert "cancelled" not in job_states(embedded_server, picked).values(), "declining cancelled anyway"

        page.once("dialog", answer(True))
        with page.expect_navigation():
            page.click("button[data-bulk='cancel']")
        message = page.text_content("#jobs-page .messages")
        shoot(page, "jobs-bulk.png", full_page=False)

        # Sorted by a column the records compute (an active job's total grows), still live.
        page.goto(embedded_server["url"] + "jobs/?sort=-total")
        page.wait_for_function("document.body.classList.contains('live')", timeout=30_000)
        sorted_rows = page.evaluate(JOBS_ROWS_JS)
        arrow = page.text_content("#frag-jobs [data-column='total'][aria-sort='descending'] .arrow")
    assert len(questions) == 2 and questions[1].startswith("Cancel 2 selected jobs?")
    assert job_states(embedded_server, picked) == {job_id: "cancelled" for job_id in picked}
    assert message and "2 jobs cancelled" in message and all(job_id in message for job_id in picked), message
    assert len(sorted_rows) == len(before) + 1 and arrow == "▼"
