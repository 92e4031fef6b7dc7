"""Issue 8's acceptance: several engine hosts and a web front on PostgreSQL + Redis.

Every process here is real: ``manage.py runengine`` per host (its own process group, its own
data directory, a distinct ``--host-name``), Daphne serving ``provingsite.asgi``, PostgreSQL
holding the records and Redis carrying the hints. Scale tiny, CPU backend, heartbeat 0.5 s,
lease 3 s. Every check reads the records from PostgreSQL with plain SQL.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from engine.status.holdings import engine_held
from tests.farm.harness import (
    HEARTBEAT_SECONDS,
    LEASE_SECONDS,
    LIVE_STATES,
    Farm,
    SseClient,
    SseEvent,
    batch,
    completion_problems,
    restart_redis,
    wait_for,
)

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(300)]

# A refused (fenced) write in an engine's log: the words the runtime may use for it.
FENCED_WRITE = re.compile(r"fenc|stale (?:write|attempt|lease)|refus|lost (?:its |the )?lease|lease (?:was )?lost|superseded",
                          re.IGNORECASE)
HEARTBEAT_AGE = re.compile(r"\d+ms|\d+\.\ds|\d+m \d\ds|\d+h \d\dm")  # fmt_ms: 587ms, 5.2s, 3m 04s


def _job_reservations(host: dict[str, Any], job_ids: list[str]) -> dict[str, int]:
    """A host's memory owned by these jobs, as /status shows it (keys are owned by no job)."""
    owners = host["memory"]["by_owner"]
    return {owner: size for owner, size in owners.items() if any(job in owner for job in job_ids) and size}


def _shows_worker_of(events: list[SseEvent], host_name: str) -> bool:
    # A worker card: <div class="card …" data-worker="HOST/DEVICE/Wn" …>.
    card = re.compile(r'data-worker="' + re.escape(host_name) + r'/[^"/]+/W\d+"')
    return any(card.search(e.data) for e in events)


# The lease tests need a given host to own work. With placement on, a host leaves the partitions
# of a key it holds cold to the host that holds it hot while that one has been free within the
# wait, and tiny jobs leave it free every few hundred milliseconds: the second host could wait
# for work past the tests' timeouts (CI saw fence-a idle for 90 s). Placement has its own tests.
FIRST_COME = {"PROVINGSITE_PLACEMENT": "0"}


def test_two_engine_hosts_and_one_web_front_prove_every_kind_exactly_once(farm: Farm) -> None:
    web = farm.start_daphne()
    hosts = farm.start_engines("farm-a", "farm-b")
    with farm.sse(web) as stream:
        jobs = farm.submit(batch("every-kind", {"winning-post": 1, "window-post": 1, "porep-c2": 1, "snap-update": 1}))
        farm.wait_jobs_finished(jobs, timeout=200, watch=hosts)

        stream.wait(lambda events: _shows_worker_of(events, "farm-a") and _shows_worker_of(events, "farm-b"),
                    timeout=15, what="worker cards of both hosts on the console stream")
        assert stream.status == 200
        assert stream.headers.get("content-type", "").startswith("text/event-stream")

    assert completion_problems(farm, jobs) == []
    provers = {p["host_name"] for p in farm.partitions(jobs)}
    assert provers == {"farm-a", "farm-b"}, f"both hosts should have proved partitions, got {provers}"


def test_a_killed_host_s_partitions_are_finished_by_the_other_host_after_its_lease_lapses(farm: Farm) -> None:
    web = farm.start_daphne()
    doomed, survivor = farm.start_engines("crash-a", "crash-b", **FIRST_COME)
    # Enough work that crash-a still holds some when it is killed: woken at once by each
    # submission, two engines finish two small jobs between two looks at the records.
    jobs = farm.submit(batch("crash", {"window-post": 8}, window_partitions=4))

    wait_for(lambda: farm.live_partitions_of("crash-a"), 90, "crash-a to own live partitions",
             on_timeout=doomed.tail)
    doomed.kill()
    orphaned = {p["id"]: p for p in farm.rows(
        "SELECT p.id, p.index, p.attempt, p.state, j.job_id AS job_name FROM engine_partition p "
        "JOIN engine_proofjob j ON j.id = p.job_id JOIN engine_enginehost h ON h.id = p.host_id "
        "WHERE h.name = 'crash-a' AND p.state = ANY(%s)", list(LIVE_STATES))}
    assert orphaned, "the killed host held no live partition when it died"

    farm.wait_jobs_finished(jobs, timeout=200, watch=[survivor])

    assert completion_problems(farm, jobs) == []
    after = {p["id"]: p for p in farm.partitions(jobs)}
    for pid, before in orphaned.items():
        now = after[pid]
        assert now["host_name"] == "crash-b", f"P{before['index']} of {before['job_name']} finished on {now['host_name']}"
        assert now["attempt"] > before["attempt"], f"P{before['index']}: attempt {before['attempt']} → {now['attempt']}"

    def crash_b() -> dict[str, Any]:
        status, body = farm.get_page(web, "/status")
        assert status == 200
        return next(h for h in json.loads(body)["hosts"] if h["name"] == "crash-b")

    def back_to_idle() -> bool:
        # What an idle host keeps reserved: its resident keys and the engine's own reservations
        # (its processes at rest, its synthesis processes' compiled matrices), nothing of a job.
        host = crash_b()
        keys = sum(entry["bytes"] for entry in host["allocations"]["srs"])
        own = sum(n for owner, n in host["memory"]["by_owner"].items() if engine_held(owner))
        return not _job_reservations(host, jobs) and host["memory"]["used_bytes"] == keys + own

    wait_for(back_to_idle, 10, "crash-b's reservations to return to its idle level",
             on_timeout=lambda: json.dumps({"memory": crash_b()["memory"], "keys": crash_b()["allocations"]}))

    def page() -> str:
        status, html = farm.get_page(web, "/")
        assert status == 200
        return html

    dead = _host_item(page(), "crash-a")
    assert "stale" in dead["classes"], f"crash-a is not shown as stale: {dead['html']}"
    assert HEARTBEAT_AGE.fullmatch(dead["heartbeat"]), f"crash-a shows no heartbeat age: {dead['html']}"
    # The survivor beats every 0.5 s; on two busy cores one render may catch a late beat.
    wait_for(lambda: "stale" not in _host_item(page(), "crash-b")["classes"], 10, "crash-b shown alive")


def _host_item(page: str, host_name: str) -> dict[str, Any]:
    """One host's entry in the hosts panel: its classes and its "heartbeat … ago" text."""
    match = re.search(r'<li class="([^"]*)" data-host="' + re.escape(host_name) + r'">(.*?)</li>', page, re.DOTALL)
    assert match, f"{host_name} is not in the hosts panel of the console page"
    age = re.search(r'class="tick heartbeat"[^>]*>([^<]*?)\s*ago<', match.group(2))
    return {"classes": match.group(1).split(), "heartbeat": age.group(1).strip() if age else "",
            "html": re.sub(r"\s+", " ", match.group(0))}


def test_a_paused_host_that_resumes_after_its_lease_lapsed_cannot_overwrite_the_reassigned_result(farm: Farm) -> None:
    sleeper, other = farm.start_engines("fence-a", "fence-b", **FIRST_COME)
    jobs: list[str] = []

    def keep_work_queued() -> None:
        """A fresh round of jobs whenever the last round is finished, so fence-a always has work to own."""
        if not jobs or all(j["state"] in ("done", "failed", "cancelled") for j in farm.jobs(jobs)):
            jobs.extend(farm.submit(batch(f"fence{len(jobs)}", {"window-post": 2}, window_partitions=8)))

    def owned_late() -> dict[str, Any] | None:
        keep_work_queued()
        live = farm.live_partitions_of("fence-a")
        late = [p for p in live if p["state"] in ("gpu", "finalizing")]
        return next(iter(late or live), None)

    # Tiny partitions finish in ~100 ms and a whole job in under a second, so the partition seen live
    # may be done by the time the host is frozen: pick the target from what the frozen host still
    # owns, else thaw, queue more work if the last round is done, and retry.
    target: dict[str, Any] | None = None
    for _ in range(20):
        wait_for(owned_late, 90, "fence-a to own a live partition", interval=0.05, on_timeout=sleeper.tail)
        # Frozen between transactions: a host frozen inside one is the next test's subject.
        farm.pause_outside_transaction(sleeper)
        target = owned_late()
        if target is not None:
            break
        sleeper.resume()
    assert target is not None, "fence-a never stayed frozen while owning a live partition"
    assert target["state"] in LIVE_STATES and target["host_id"] is not None
    lease_lapses_at = target["lease_expires_at"]  # renewed before the freeze, never after it
    # Whatever it is doing, the paused host sees its rows only once it wakes up.
    target_attempt = farm.value("SELECT attempt FROM engine_partition WHERE id = %s", target["id"])

    farm.wait_jobs_finished(jobs, timeout=200, watch=[other])
    assert completion_problems(farm, jobs) == []
    settled = farm.one("SELECT p.*, h.name AS host_name FROM engine_partition p "
                       "LEFT JOIN engine_enginehost h ON h.id = p.host_id WHERE p.id = %s", target["id"])
    assert settled is not None
    assert settled["host_name"] == "fence-b" and settled["attempt"] > target_attempt
    # Reassigned only once the frozen host's lease had lapsed, not while it still held it.
    assert settled["claimed_at"] >= lease_lapses_at

    log_before = len(sleeper.log())
    sleeper.resume()
    wait_for(lambda: FENCED_WRITE.search(sleeper.log()[log_before:]), 30,
             "the resumed host to log its refused write", on_timeout=sleeper.tail)
    time.sleep(4 * HEARTBEAT_SECONDS)  # and a few beats more to try anything else

    now = farm.one("SELECT p.*, h.name AS host_name FROM engine_partition p "
                   "LEFT JOIN engine_enginehost h ON h.id = p.host_id WHERE p.id = %s", target["id"])
    assert now is not None
    for column in ("host_name", "worker_id", "attempt", "state", "proof", "public_inputs", "finished_at", "version"):
        assert now[column] == settled[column], f"{column} changed after the paused host resumed"
    job = farm.jobs(jobs)[0]
    assert job["state"] == "done" and completion_problems(farm, jobs) == []


def test_a_host_frozen_inside_a_transaction_does_not_stall_the_other_hosts(farm: Farm) -> None:
    frozen, other = farm.start_engines("stall-a", "stall-b", **FIRST_COME)
    # Enough work that stall-a still holds some when it is frozen: woken at once by each
    # submission, two engines finish two small jobs before a poll of the records sees them, and
    # eight before it on a machine other tests share (bin/test runs several at once).
    jobs = farm.submit(batch("stall", {"window-post": 32}, window_partitions=3))
    wait_for(lambda: farm.live_partitions_of("stall-a"), 90, "stall-a to be proving", on_timeout=frozen.tail)

    # Freeze stall-a inside one of its writes, holding its clock row and the rows it writes.
    tx = farm.pause_inside_transaction(frozen, "engine_statusclock")
    clock = farm.value("SELECT sum(value) FROM engine_statusclock")
    time.sleep(LEASE_SECONDS + 2)
    blocked = farm.rows("SELECT application_name, wait_event_type, query FROM pg_stat_activity "
                        "WHERE datname = %s AND application_name = 'stall-b' AND wait_event_type = 'Lock'",
                        farm.database)
    advanced = farm.value("SELECT sum(value) FROM engine_statusclock")
    assert not blocked and advanced != clock, (
        f"stall-b is blocked behind frozen stall-a's open transaction ({tx['state']} since {tx['xact_start']}, "
        f"last statement {tx['query'][:200]!r}): clock {clock} → {advanced}, waiting: {blocked}")
    farm.wait_jobs_finished(jobs, timeout=200, watch=[other])
    assert completion_problems(farm, jobs) == []


def _snapshot_version(event: SseEvent) -> int | None:
    """The status version a snapshot reflects: its event id, or the data-version it carries."""
    if event.id and event.id.isdigit():
        return int(event.id)
    versions = [int(v) for v in re.findall(r'data-(?:status-)?version="(\d+)"', event.data)]
    return max(versions) if versions else None


def test_after_a_redis_restart_engines_keep_proving_and_a_reconnecting_console_is_not_stale(farm: Farm) -> None:
    web = farm.start_daphne()
    hosts = farm.start_engines("redis-a", "redis-b")
    first = farm.sse(web)
    try:
        first.wait(lambda events: events, 20, "the first snapshot")
        before = farm.submit(batch("before-restart", {"window-post": 2}, window_partitions=3))
        wait_for(lambda: farm.value("SELECT count(*) AS n FROM engine_partition WHERE state = 'done'") >= 2,
                 90, "some partitions to be proved")

        restart_redis(down_seconds=2)
        after = farm.submit(batch("after-restart", {"window-post": 1, "winning-post": 1}))
        farm.wait_jobs_finished(before + after, timeout=200, watch=hosts)
        assert completion_problems(farm, before + after) == []

        # The console left open through the restart kept its stream and caught up by itself.
        wait_for(lambda: _latest_job_totals(first) == _records_job_totals(farm), 20,
                 "the console kept open through the restart to show the records' job counters",
                 on_timeout=lambda: f"shown {_latest_job_totals(first)}, records {_records_job_totals(farm)}")
        assert not first.closed.is_set(), "the open stream was dropped by the restart"
        last_id = next((e.id for e in reversed(first.events) if e.id), None)
    finally:
        first.close()

    clock = farm.value("SELECT sum(value) AS v FROM engine_statusclock")  # the farm's version
    with farm.sse(web, last_event_id=last_id) as again:
        snapshot = again.wait(lambda events: events[0] if events else None, 20, "a snapshot on reconnect")
        shown = again.text()
    assert again.status == 200
    version = _snapshot_version(snapshot)
    assert version is not None, f"the snapshot carries no version: {snapshot.data[:500]}"
    assert version >= clock, f"snapshot version {version} is older than the records' {clock}"
    records = _records_job_totals(farm)
    assert _job_totals(shown) == records, "the reconnected snapshot's job counters differ from the records"
    for job_id in before + after:  # finished jobs have left the active pipelines
        assert job_id not in _section(shown, "frag-pipelines"), f"{job_id} still shown as active"
    for host in ("redis-a", "redis-b"):
        assert f'data-host="{host}"' in shown, f"{host} missing from the reconnected snapshot"


def _records_job_totals(farm: Farm) -> dict[str, int]:
    return {r["state"]: r["n"] for r in farm.rows("SELECT state, count(*) AS n FROM engine_proofjob GROUP BY state")}


def _latest_job_totals(stream: SseClient) -> dict[str, int] | None:
    """The job counters as the stream last swapped them in."""
    for event in reversed(list(stream.events)):
        if 'id="frag-counters"' in event.data:
            return _job_totals(event.data)
    return None


def _section(html: str, dom_id: str) -> str:
    match = re.search(r'<section id="' + dom_id + r'".*?</section>', html, re.DOTALL)
    assert match, f"no {dom_id} in the snapshot"
    return match.group(0)


def _job_totals(html: str) -> dict[str, int]:
    """The counters panel's "all" row, by state, leaving out the zeros."""
    counters = _section(html, "frag-counters")
    head = re.search(r"<thead>(.*?)</thead>", counters, re.DOTALL)
    foot = re.search(r"<tfoot>(.*?)</tfoot>", counters, re.DOTALL)
    assert head and foot, "the counters panel has its header and its totals"
    states = re.findall(r"<th>(\w+)</th>", head.group(1))[1:]
    totals = re.findall(r"<td[^>]*>(\d+)</td>", foot.group(1))
    return {state: int(n) for state, n in zip(states, totals, strict=True) if int(n)}
