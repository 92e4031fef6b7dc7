"""A newcomer's first hour, walked in headless Chromium against one real engine (issue 48).

`manage.py runengine --serve --demo` runs as a subprocess (SQLite, the in-memory channel layer,
the CPU backend, scale tiny); a client registers a circom circuit through the API and sends a
witness of it, and a snap-update job arrives to watch. The newcomer then logs in through the
login form, watches the job move without a reload, opens its page, downloads its proofs (the
circom job's proof.json passes `snarkjs groth16 verify`), evicts and preloads a key from its
chip (each asks first), and drains and resumes the host. Beside each step, what the issue's
numbered points said a newcomer tripped on, checked as the browser renders it: 3 (a registered
circuit by its name; long ids never wrap a chip or a legend row), 6 (colours that mean one
thing each), 7 (one name and one format for curves and moments, on pages and in the API) and
10 (counts, headings, job ids, the log box and form controls), 2 (inputs for a circuit without
its wasm name the witness routes), 5 (key control without a body), and at the end 4 (bin/run's
help), 9 (the engine's own log: its address, no line per claim or proof) and 1 (Ctrl-C
acknowledged). Point 8 (a failure's reason said once) is tests/engine/test_heartbeat.py's, point
11 (the first run's time) bench/first_run.py's. Screenshots of each step are
saved under artifacts/ (newcomer-*.png).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_service
from tests.console.test_browser import CHROMIUM, CHROMIUM_ARGS, ROOT, free_port, shoot, wait_for_port

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(420)]

USER, PASSWORD = "newcomer", "newcomer-test-pw"
CHAIN = ROOT / "tests" / "fixtures" / "snarkjs" / "bn128"  # a 200-constraint circom circuit, its zkey and witness
# Registered under its zkey's file name, which is long: it must be cut, never wrap its chip.
CHAIN_NAME = "chain-of-one-hundred-squarings-with-public-k-and-out-bn128.zkey"
SEEDS = {"sector_seed": "ab" * 32, "randomness": "cd" * 32, "data_seed": "ef" * 32}
MOMENT_ON_A_PAGE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{3})? UTC$")
MOMENT_IN_THE_API = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
AMBER = "rgb(210, 153, 34)"  # console.css --amber: a warning


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """One engine serving the console and the API, a staff login with a password, and an
    operator's API token."""
    env = {**os.environ, "PROVINGSITE_DATA_DIR": str(tmp_path), "PROVINGSITE_DEVICES": "cpu",
           "PROVINGSITE_SCALE": "tiny", "DJANGO_SETTINGS_MODULE": "provingsite.settings"}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--verbosity", "0"], env=env, cwd=ROOT, check=True, timeout=120)
    subprocess.run([*manage, "shell", "-c", (
        "from django.contrib.auth import get_user_model\n"
        f"get_user_model().objects.create_user({USER!r}, password={PASSWORD!r}, is_staff=True)")],
        env=env, cwd=ROOT, check=True, timeout=120)
    token = subprocess.run([*manage, "createtoken", "newcomer-client", "--operator"], env=env, cwd=ROOT, check=True,
                           timeout=120, capture_output=True, text=True).stdout.strip()
    port = free_port()
    server = subprocess.Popen([*manage, "runengine", "--serve", "--demo", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_port(port, server)
        assert server.stdout is not None
        said: list[str] = []
        out = server.stdout
        threading.Thread(target=lambda: said.extend(out), name="server-log", daemon=True).start()
        yield {"url": f"http://127.0.0.1:{port}/", "token": token, "server": server, "said": said}
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    require_service(Path(CHROMIUM).exists(), "Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser.new_context(viewport={"width": 1440, "height": 900}, accept_downloads=True).new_page()
        finally:
            browser.close()


def answer_of(page: Any, engine: dict[str, Any], method: str, path: str, body: dict[str, Any] | None = None,
              **kwargs: Any) -> Any:
    """The API's answer as a client gets it, with the operator's token (Playwright's request
    context): ``body`` as JSON, or ``multipart=`` a form with files."""
    headers = {"Authorization": f"Bearer {engine['token']}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
        kwargs["data"] = json.dumps(body)
    return page.request.fetch(engine["url"] + path.lstrip("/"), method=method, headers=headers, **kwargs)


def api(page: Any, engine: dict[str, Any], method: str, path: str, body: dict[str, Any] | None = None,
        **kwargs: Any) -> Any:
    """What the API answers, which must be a success."""
    answer = answer_of(page, engine, method, path, body, **kwargs)
    assert answer.status < 300, f"{method} {path}: {answer.status} {answer.text()}"
    return answer.json()


def until(page: Any, predicate: str, arg: Any = None, seconds: float = 90) -> None:
    page.wait_for_function(predicate, arg=arg, timeout=seconds * 1000)


def moments(body: Any) -> Iterator[str]:
    if isinstance(body, dict):
        for value in body.values():
            yield from moments(value)
    elif isinstance(body, list):
        for value in body:
            yield from moments(value)
    elif isinstance(body, str) and re.match(r"^\d{4}-\d\d-\d\dT", body):
        yield body


# ---- what the page shows, measured in the browser -------------------------------------------

# A worker card proving: its job id on one line, cut rather than broken.
CARD_IDS_JS = """() => [...document.querySelectorAll('#frag-workers .card.proving .job-id')].map(el => {
  const line = parseFloat(getComputedStyle(el.closest('.doing')).lineHeight) || 18;
  return {id: el.textContent, rects: el.getClientRects().length, height: el.getBoundingClientRect().height, line,
          wrap: getComputedStyle(el).whiteSpace};
})"""

# Every key chip and memory legend row: one line high, however long the circuit's name.
ONE_LINE_JS = """() => {
  const rows = [...document.querySelectorAll('#frag-keys .chip, #frag-memory .legend li')];
  return rows.map(el => {
    const name = el.querySelector('.chip-name, .owner');
    const line = name ? name.getBoundingClientRect().height : 16;
    return {text: (name || el).textContent, height: el.getBoundingClientRect().height, line,
            cut: name ? name.scrollWidth > name.clientWidth : false};
  });
}"""

# The colours a reader tells states and owners apart by.
COLOURS_JS = """() => {
  const style = sel => { const el = document.querySelector(sel); const s = el && getComputedStyle(el);
    return s && {bg: s.backgroundColor, border: s.borderTopColor, style: s.borderTopStyle}; };
  const kinds = [...document.querySelectorAll('.legend-bars [data-legend-kind] .swatch')].map(
      s => getComputedStyle(s).backgroundColor);
  // a job's reservation is named "<kind> <job id>"; a key "key:<circuit>"; the engine's own otherwise
  const kinds_named = [...document.querySelectorAll('.legend-bars [data-legend-kind]')].map(li => li.dataset.legendKind);
  const owners = [...document.querySelectorAll('#frag-memory .legend li')].map(li => {
      const owner = li.querySelector('.owner').textContent;
      return {owner, holder: kinds_named.includes(owner.split(' ')[0]) ? 'job' : 'other',
              colour: getComputedStyle(li.querySelector('i')).backgroundColor}; });
  const reason = document.querySelector('[data-synthesis-reason]');
  return {synthesizing: style('.legend-cells .swatch.synthesizing'), synth_done: style('.legend-cells .swatch.synth_done'),
          kinds, owners, reason: reason && [reason.textContent, getComputedStyle(reason).color]};
}"""

CONTROLS_JS = """() => [...document.querySelectorAll('#jobs-page select, #jobs-page input[type=text], #jobs-page input[type=search], #jobs-page button')]
  .map(el => ({tag: el.tagName, bg: getComputedStyle(el).backgroundColor, colour: getComputedStyle(el).color}))"""

HEADING_JS = """() => { const h1 = document.querySelector('main h1'); const lead = h1.nextElementSibling;
  return {h1: h1.textContent.trim(), h1Bottom: h1.getBoundingClientRect().bottom, leadTop: lead.getBoundingClientRect().top}; }"""

LOG_BOX_JS = """() => { const box = document.querySelector('#job-log .log-lines'); const s = getComputedStyle(box);
  return {max: parseFloat(s.maxHeight), line: parseFloat(s.lineHeight), lines: box.children.length}; }"""


def rgb(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", text)[:3])


def saturation(text: str) -> float:
    r, g, b = (c / 255 for c in rgb(text))
    high, low = max(r, g, b), min(r, g, b)
    if high == low:
        return 0.0
    lightness = (high + low) / 2
    return (high - low) / (1 - abs(2 * lightness - 1))


def luminance(text: str) -> float:
    r, g, b = rgb(text)
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def test_a_newcomer_logs_in_watches_a_job_downloads_its_proofs_moves_a_key_and_drains_the_host(
        engine: dict[str, Any], tmp_path: Path) -> None:
    url = engine["url"]
    with chromium() as page:
        # ---- log in, through the form ----------------------------------------------------------
        page.goto(url)
        assert "/login/" in page.url, "the console did not ask a stranger to log in"
        shoot(page, "newcomer-1-login.png", full_page=False)
        page.fill("input[name=username]", USER)
        page.fill("input[name=password]", PASSWORD)
        with page.expect_navigation():
            page.click("form button[type=submit]")
        assert page.url == url, page.url
        until(page, "document.body.classList.contains('live')", seconds=30)

        # ---- a client's work arrives: a circom circuit and its witness, and a job to watch -----
        circuit = api(page, engine, "POST", "api/v1/circuits", multipart={
            "zkey": {"name": CHAIN_NAME, "mimeType": "application/octet-stream",
                     "buffer": (CHAIN / "circuit.zkey").read_bytes()}})
        assert circuit["name"] == CHAIN_NAME and (circuit["curve"], circuit["curve_name"]) == ("bn128", "BN254")
        # (2) inputs for a circuit registered without its wasm: refused, naming the routes that take a witness
        refused = answer_of(page, engine, "POST", "api/v1/jobs", {"circuit": circuit["id"], "job_id": "no-wasm",
                                                                  "inputs": {"k": 3}})
        assert refused.status == 409 and refused.json()["error"] == "no_wasm", refused.text()
        assert f"POST /api/v1/circuits/{circuit['id']}/jobs" in refused.json()["detail"]
        assert "POST /api/v1/jobs/custom" in refused.json()["detail"]
        api(page, engine, "POST", f"api/v1/circuits/{circuit['id']}/jobs", multipart={
            "job_id": "chain-1", "wtns": {"name": "witness.wtns", "mimeType": "application/octet-stream",
                                          "buffer": (CHAIN / "witness.wtns").read_bytes()}})
        api(page, engine, "POST", "api/v1/jobs", {"kind": "snap-update", "job_id": "watch-me", "inputs": SEEDS})

        # ---- watch it: its cells move without a reload; a card proving it keeps its id on one line
        page.evaluate("() => { window.__firstLoad = true; }")
        states: set[tuple[str, ...]] = set()
        cards: list[dict[str, Any]] = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            cells = page.evaluate("""() => [...document.querySelectorAll('#frag-pipelines .pipeline[data-job="watch-me"] .cell')]
                                     .map(c => c.dataset.state)""")
            if cells:
                states.add(tuple(cells))
            cards += page.evaluate(CARD_IDS_JS)
            if len(states) == 3:
                shoot(page, "newcomer-2-watching.png")
            done = api(page, engine, "GET", "api/v1/jobs/watch-me")["state"] in ("done", "failed")
            if done and api(page, engine, "GET", "api/v1/jobs/chain-1")["state"] in ("done", "failed"):
                break
            time.sleep(0.2)
        assert page.evaluate("() => window.__firstLoad === true"), "the console reloaded while the job moved"
        assert len(states) >= 2, f"the job's cells never moved on the page: {states}"
        # (10) a job id on a worker card is cut with an ellipsis, never broken mid-word
        assert cards, "no worker card was seen proving"
        assert all(c["rects"] == 1 and c["wrap"] == "nowrap" and c["height"] <= 1.5 * c["line"] for c in cards), cards

        # ---- the console at rest: names, colours and counts ------------------------------------
        page.reload()
        until(page, "document.body.classList.contains('live')", seconds=30)
        until(page, """() => document.querySelector('#frag-keys .chip[data-circuit^="circom/"]') !== null""")
        shoot(page, "newcomer-3-console.png")
        chip = page.query_selector('#frag-keys .chip[data-circuit^="circom/"]')
        assert chip is not None
        # (3) the registered circuit by its name, its id whole in the title and data, never as the chip's text
        assert chip.get_attribute("data-circuit") == f"circom/{circuit['id']}"
        assert chip.query_selector(".chip-name").text_content() == CHAIN_NAME
        assert circuit["id"] in (chip.get_attribute("title") or "")
        assert circuit["id"] not in page.inner_text("#frag-keys") + page.inner_text("#frag-memory")
        # (3) and however long, it is cut rather than wrap its chip or its memory legend row
        rows = page.evaluate(ONE_LINE_JS)
        assert rows and all(r["height"] < 2 * r["line"] for r in rows), rows
        assert any(r["cut"] for r in rows if r["text"] == CHAIN_NAME), rows
        colours = page.evaluate(COLOURS_JS)
        # (6) synthesizing and synthesized-waiting are told apart at a glance
        synth, waiting = colours["synthesizing"], colours["synth_done"]
        assert synth["style"] != waiting["style"] or max(
            abs(a - b) for a, b in zip(rgb(synth["border"]), rgb(waiting["border"]), strict=True)) > 100, colours
        # (6) a legend dot wears a kind's colour only for a job of that kind: keys and the engine are greys
        assert colours["owners"], "the memory legend listed no owner"
        for owner in colours["owners"]:
            if owner["holder"] != "job":
                assert owner["colour"] not in colours["kinds"] and saturation(owner["colour"]) < 0.2, owner
        # (6) nothing pending is normal: said in a calm colour, not a warning's
        text, colour = colours["reason"]
        assert text == "idle: nothing pending" and colour != AMBER, colours["reason"]
        # (10) a count of one is singular, of any other plural
        heading = page.inner_text("#frag-counters h2")
        depth = re.search(r"queue depth: (\d+) (jobs?)", heading)
        assert depth and (depth.group(2) == "job") == (depth.group(1) == "1"), heading

        # ---- open the watched job's page from the jobs table; download its proofs ---------------
        page.goto(url + "jobs/")
        until(page, "document.body.classList.contains('live')", seconds=30)
        shoot(page, "newcomer-4-jobs.png", full_page=False)
        # (7) moments on a page: one format, in UTC, saying so
        submitted = page.eval_on_selector_all("#frag-jobs [role=row] time", "els => els.map(e => e.textContent)")
        assert submitted and all(MOMENT_ON_A_PAGE.match(t) for t in submitted), submitted
        # (10) the page's form controls in its dark colours, not the browser's white
        controls = page.evaluate(CONTROLS_JS)
        assert controls and all(luminance(c["bg"]) < 0.25 and luminance(c["colour"]) > 0.6 for c in controls), controls
        with page.expect_navigation():
            page.click("#frag-jobs [data-job='watch-me'] a.job-id")
        until(page, "document.getElementById('job-detail-head').dataset.state === 'done'", seconds=60)
        shoot(page, "newcomer-5-job.png")
        with page.expect_download() as download:
            page.click("#job-detail-head a:text('download proofs (JSON)')")
        proofs = json.loads(Path(download.value.path()).read_text())
        assert proofs["verified"] and len(proofs["partitions"]) == 16 and all(p["proof"] for p in proofs["partitions"])
        # (7) the curve named both ways, on the page and in what it downloads
        assert page.inner_text("#job-detail-head .curve") == "BLS12-381 (bls12381)"
        assert (proofs["curve"], proofs["curve_name"]) == ("bls12381", "BLS12-381")
        assert MOMENT_ON_A_PAGE.match(page.inner_text("#job-detail-head time"))
        # (10) the log box is a whole number of lines high: it never ends halfway through one
        box = page.evaluate(LOG_BOX_JS)
        assert box["lines"] > 0 and abs(box["max"] / box["line"] - round(box["max"] / box["line"])) < 0.02, box
        # (7) the API writes each moment one way
        written = list(moments(api(page, engine, "GET", "api/v1/jobs/watch-me")))
        assert written and all(MOMENT_IN_THE_API.match(m) for m in written), written

        # ---- the circom job's page: its circuit by name, its proof verified by snarkjs ----------
        page.goto(url + "jobs/chain-1")
        until(page, "document.body.classList.contains('live')", seconds=30)
        assert page.inner_text("#job-detail-head .circuit") == CHAIN_NAME  # (3)
        assert page.get_attribute("#job-detail-head .circuit", "title") == f"circom/{circuit['id']}"
        assert page.inner_text("#job-detail-head .curve") == "BN254 (bn128)"  # (7)
        shoot(page, "newcomer-6-circom-job.png")
        with page.expect_download() as download:
            page.click("#job-detail-head a:text('snarkjs proof.json + public.json')")
        (part,) = json.loads(Path(download.value.path()).read_text())["partitions"]
        with page.expect_download() as download:
            page.click("#job-detail-head a:text('verification_key.json')")
        key = json.loads(Path(download.value.path()).read_text())
        assert key["curve"] == "bn128"  # (7) snarkjs's own file keeps snarkjs's name
        from tests.oracle import snarkjs as oracle

        if oracle.snarkjs_path() is not None:
            for name, body in (("vk.json", key), ("proof.json", part["proof"]), ("public.json", part["public"])):
                (tmp_path / name).write_text(json.dumps(body))
            assert oracle.groth16_verify(tmp_path / "vk.json", tmp_path / "public.json", tmp_path / "proof.json")

        # ---- evict a key from its chip, then preload it, each asked first -----------------------
        page.goto(url)
        until(page, "document.body.classList.contains('live')", seconds=30)
        hot = page.query_selector("#frag-keys .chip[data-tier='hot'][data-circuit$='/tiny']")
        assert hot is not None, page.inner_html("#frag-keys")
        kind_key = hot.get_attribute("data-circuit")
        chip_of = f"#frag-keys .chip[data-circuit='{kind_key}']"
        questions: list[str] = []

        def answer(accept: bool) -> Any:
            def handle(dialog: Any) -> None:
                questions.append(dialog.message)
                dialog.accept() if accept else dialog.dismiss()
            return handle

        page.once("dialog", answer(False))
        page.click(f"{chip_of} button[data-action='evict'][data-to='cold']")
        page.wait_for_timeout(1000)
        assert page.get_attribute(chip_of, "data-tier") == "hot", "declining the question evicted the key anyway"
        page.once("dialog", answer(True))
        page.click(f"{chip_of} button[data-action='evict'][data-to='cold']")
        until(page, "sel => document.querySelector(sel).dataset.tier === 'cold'", chip_of, seconds=60)
        page.once("dialog", answer(True))
        page.click(f"{chip_of} button[data-action='preload'][data-to='hot']")
        until(page, "sel => document.querySelector(sel).dataset.tier === 'hot'", chip_of, seconds=60)
        shoot(page, "newcomer-7-keys.png")
        assert questions[0] == questions[1] and questions[0].startswith(f"evict {kind_key} to cold on "), questions
        assert questions[2].startswith(f"preload {kind_key} to hot on "), questions
        # (5) the API's key control needs no body: the default tier, on every host
        asked = api(page, engine, "POST", f"api/v1/keys/{kind_key}/preload")
        assert [(r["action"], r["tier"]) for r in asked["requests"]] == [("preload", "hot")], asked

        # ---- drain the host and resume it ------------------------------------------------------
        host = page.get_attribute("#frag-hosts [data-host]", "data-host")
        with page.expect_navigation():
            page.click("#frag-hosts a.host-action:text('drain')")
        with page.expect_navigation():
            page.click(f"button:text('drain {host}')")
        until(page, "() => document.querySelector('#frag-hosts .flag.draining') !== null", seconds=30)
        # Read in one evaluation: a live swap may replace the element between two reads.
        text, colour = page.eval_on_selector("[data-synthesis-reason]", "el => [el.textContent, getComputedStyle(el).color]")
        assert text == "draining: claims nothing new"
        assert colour == AMBER  # (6) a host held back is a warning
        shoot(page, "newcomer-8-drained.png", full_page=False)
        with page.expect_navigation():
            page.click("#frag-hosts a.host-action:text('resume')")
        with page.expect_navigation():
            page.click(f"button:text('resume {host}')")
        until(page, "() => document.querySelector('#frag-hosts .flag.draining') === null", seconds=30)

        # ---- (10) headings say what a page is, and what it shows on a line of its own ----------
        for path, title in (("capacity/", "Capacity"), ("history/", "History")):
            page.goto(url + path)
            heading = page.evaluate(HEADING_JS)
            assert heading["h1"] == title and heading["leadTop"] >= heading["h1Bottom"], heading
            shoot(page, f"newcomer-9-{title.lower()}.png", full_page=False)

        # ---- (4) bin/run's help: its port and address, at once (no setup, no migration) -----------
        helped = subprocess.run(["bash", str(ROOT / "bin" / "run"), "--help"], capture_output=True, text=True,
                                timeout=60)
        assert helped.returncode == 0 and "PORT=8000" in helped.stdout and "HOST=127.0.0.1" in helped.stdout

        # ---- (9) the engine's own log: the address stands out, no line per claim or proof -------
        log = "".join(engine["said"])
        assert "console and API on " + url in log, log[-3000:]
        assert "claimed P" not in log and "proved P" not in log, log[-3000:]

        # ---- (1) Ctrl-C: acknowledged at once, saying how to stop now ----------------------------
        server = engine["server"]
        server.send_signal(signal.SIGINT)
        assert server.wait(60) == 0
        for _ in range(50):  # the reader thread may still hold the last lines
            log = "".join(engine["said"])
            if "again to stop now" in log:
                break
            time.sleep(0.1)
        assert "stopping: finishing " in log and "Ctrl-C again to stop now" in log, log[-3000:]
