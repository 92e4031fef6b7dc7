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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_service

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

# On every animation frame: each card and cell must carry its state in its class, its data-state
# and (cards) its text at once (a swap that settles attributes later shows the old class under
# the new text for a frame or two), and cards, cells and the synthesis count must agree.
FRAME_WATCH_JS = """() => {
  window.__frames = 0; window.__torn = [];
  const check = () => {
    window.__frames++;
    document.querySelectorAll('#frag-workers [data-worker], .cell[data-partition]').forEach(el => {
      const state = el.dataset.state;
      const proving = el.dataset.worker !== undefined && /proving P\\d+/.test(el.textContent);
      if (!el.classList.contains(state) || (el.dataset.worker !== undefined && proving !== (state === 'proving'))) {
        if (window.__torn.length < 20) window.__torn.push([el.id, el.className, state, el.textContent.slice(0, 60)]);
      }
    });
    // Cards, cells and the synthesis count must agree on every frame: the stream sends every
    // unit a snapshot changed in one frame, and htmx swaps a frame's units in one task.
    const cells = {};
    document.querySelectorAll('.cell[data-partition]').forEach(c => { cells[c.dataset.partition] = c.dataset.state; });
    const proving = new Set();
    document.querySelectorAll('#frag-workers [data-worker][data-state="proving"]').forEach(card => {
      card.dataset.partition.split(' ').filter(Boolean).forEach(p => {
        proving.add(p);
        if (p in cells && cells[p] !== 'gpu' && window.__torn.length < 20) window.__torn.push(['card', p, cells[p]]);
      });
    });
    Object.entries(cells).forEach(([p, state]) => {
      if (state === 'gpu' && !proving.has(p) && window.__torn.length < 20) window.__torn.push(['cell', p, 'no card']);
    });
    // A worker proving a kind holds that kind's key: its host's chip for it says "in use".
    document.querySelectorAll('#frag-workers [data-worker][data-state="proving"]').forEach(card => {
      card.dataset.kinds.split(' ').filter(Boolean).forEach(kind => {
        const chips = [...document.querySelectorAll('#frag-keys .chip[data-circuit]')].filter(
            c => c.dataset.host === card.dataset.host && c.dataset.circuit.split('/')[0] === kind);
        if (!chips.some(c => c.dataset.state === 'in use') && window.__torn.length < 20) {
          window.__torn.push(['key', card.dataset.worker, kind, chips.map(c => c.dataset.state).join(',')]);
        }
      });
    });
    const active = document.querySelector('[data-synthesis-active]');
    const synthesizing = Object.values(cells).filter(s => s === 'synthesizing').length;
    if (active && Number(active.textContent) !== synthesizing && window.__torn.length < 20) {
      window.__torn.push(['synthesis', active.textContent, synthesizing]);
    }
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


class RecordsPoller(threading.Thread):
    """Reads (version, proving workers) from the records in read snapshots, as often as it can."""

    def __init__(self, database: Path) -> None:
        super().__init__(daemon=True)
        self.database = database
        self.states: dict[int, frozenset[tuple[str, str]]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        db = sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, isolation_level=None, timeout=5)
        try:
            while not self.stop.is_set():
                try:
                    db.execute("BEGIN")
                    row = db.execute("SELECT value FROM engine_statusclock ORDER BY id LIMIT 1").fetchone()
                    proving = frozenset(db.execute(GPU_NOW).fetchall())
                    db.execute("COMMIT")
                except sqlite3.OperationalError:
                    continue
                if row is not None:
                    self.states[int(row[0])] = proving
                time.sleep(0.01)
        finally:
            db.close()


@pytest.fixture
def embedded_server(tmp_path: Path) -> Iterator[dict[str, Any]]:
    env = {**os.environ, "PROVINGSITE_DATA_DIR": str(tmp_path), "PROVINGSITE_DEVICES": "cpu",
           "PROVINGSITE_SCALE": "tiny", "DJANGO_SETTINGS_MODULE": "provingsite.settings"}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
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
        yield {"url": f"http://127.0.0.1:{port}/", "session": login.stdout.strip().splitlines()[-1],
               "database": tmp_path / "provingsite.sqlite3"}
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


def test_the_console_goes_live_and_agrees_with_the_records(embedded_server: dict[str, Any]) -> None:
    poller = RecordsPoller(embedded_server["database"])
    samples: list[dict[str, Any]] = []
    with signed_in_page(embedded_server) as page:
        poller.start()
        try:
            page.wait_for_function("document.body.classList.contains('live')", timeout=30_000)
            page.evaluate(FRAME_WATCH_JS)
            deadline = time.monotonic() + 120
            screenshot_taken = False
            while time.monotonic() < deadline:
                samples.append(page.evaluate(SAMPLE_JS))
                if not screenshot_taken and any(card[1] == "proving" for card in samples[-1]["cards"]):
                    shoot(page)
                    screenshot_taken = True
                if screenshot_taken and seen_enough(samples, poller):
                    break
                time.sleep(0.1)
            frames, torn = page.evaluate("() => [window.__frames, window.__torn]")
            if not screenshot_taken:
                shoot(page)
        finally:
            poller.stop.set()
            poller.join(5)

    assert all(s["live"] for s in samples), "the stream dropped during the run"
    assert frames > 100, f"only {frames} animation frames were watched"
    assert not torn, f"the page contradicted itself on an animation frame: {torn[:3]}"
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
  return {state: head ? head.dataset.state : null, links: head ? head.querySelector('.links').innerHTML : '',
          rows: [...document.querySelectorAll('#frag-job .prow[data-partition]')].map(r => r.dataset.state),
          ticks: [...document.querySelectorAll('#frag-job [data-started-at]')].map(t => t.textContent),
          same_page: window.__firstLoad === true, live: document.body.classList.contains('live')};
}"""

# The job the engine will serve last (claim order reversed), so it is still queued when the
# page, opened after Chromium starts on a loaded machine, first goes live.
LAST_QUEUED = """
SELECT job_id FROM engine_proofjob WHERE state IN ('queued', 'running')
ORDER BY state = 'queued' DESC, priority DESC, submitted_at DESC, id DESC LIMIT 1
"""


def test_the_job_page_goes_live_and_shows_the_proof_links_when_done_without_a_reload(
        embedded_server: dict[str, Any]) -> None:
    from urllib.parse import quote

    with sqlite3.connect(f"file:{embedded_server['database']}?mode=ro", uri=True, timeout=5) as db:
        row = db.execute(LAST_QUEUED).fetchone()
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

    final = samples[-1]
    assert final["state"] == "done", f"the job page never showed the job done: {final}"
    assert final["same_page"] and all(s["live"] for s in samples), "the page reloaded or the stream dropped"
    assert set(final["rows"]) == {"done"} and "snarkjs.json" in final["links"] and "proofs.json" in final["links"]
    assert any(s["state"] != "done" for s in samples), "the job was never seen before it was done"
    assert "snarkjs.json" not in samples[0]["links"]


JOBS_ROWS_JS = """() => [...document.querySelectorAll('#jobs-page table.jobs tbody tr[id^="job-row-"]')].map(
    tr => ({kind: tr.children[1].textContent.trim(), state: tr.className}))"""


def test_the_jobs_page_lists_the_demo_jobs_and_narrows_them_by_kind(embedded_server: dict[str, Any]) -> None:
    with signed_in_page(embedded_server, "jobs/") as page:
        every = page.evaluate(JOBS_ROWS_JS)
        assert len({r["kind"] for r in every}) > 1, f"the jobs page did not list the demo jobs of every kind: {every}"
        shoot(page, "jobs.png", full_page=False)
        page.select_option("#jobs-page select[name=kind]", "window-post")
        with page.expect_navigation():
            page.click("#jobs-page form.filters button[type=submit]")
        narrowed = page.evaluate(JOBS_ROWS_JS)
        assert "kind=window-post" in page.url
    assert narrowed and {r["kind"] for r in narrowed} == {"window-post"}, f"the kind filter let through {narrowed}"
