"""The job log: the engine's lines about a job carry its id as fields, are collected without
slowing the pipeline, kept (the newest few per job) by the ledger, and shown on its page."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from engine.circuits.kinds import demo_inputs, validate_inputs
from engine.ledger import job_log
from engine.ledger.job_log import Line, about
from engine.ledger.submission import Submission, submit
from engine.models import JobLogLine, ProofJob
from engine.pipeline import job_log as collector
from engine.pipeline.job_log import JobLogHandler
from tests.engine.conftest import wait_until

log = logging.getLogger("engine.test")


def real_job(job_id: str, kind: str = "winning-post") -> ProofJob:
    """A job the circuit accepts (the demo's inputs), as a client submits it."""
    inputs, n = validate_inputs(kind, demo_inputs(kind))
    job, _ = submit(Submission(kind=kind, job_id=job_id, inputs=inputs, num_partitions=n, circuit_id=f"{kind}/tiny",
                               scale="tiny"))
    return job


def page(job_id: str) -> str:
    client = Client()
    client.force_login(get_user_model().objects.get_or_create(username="ops", defaults={"is_staff": True})[0])
    html = client.get(f"/jobs/{job_id}").content.decode()
    return html.split('id="job-log"', 1)[1].split("</div>", 1)[0]


@pytest.mark.django_db(transaction=True)
def test_a_real_run_records_the_jobs_lines_and_its_page_shows_them(start_engine) -> None:
    job, other = real_job("logged-job"), real_job("another-job")
    engine = start_engine()
    host = engine.host.name
    assert engine.run_until_idle(timeout=120)

    def lines(job_pk: int) -> list[tuple[str, str, int | None, str]]:
        return list(JobLogLine.objects.filter(job_id=job_pk).order_by("pk")
                    .values_list("level", "host", "partition", "message"))

    wait_until(lambda: any(m.startswith("job done") for *_, m in lines(job.pk)), timeout=10)
    mine = lines(job.pk)
    said = [m for *_, m in mine]
    assert said[0].startswith(f"claimed P0 of {job.job_id} on {host} (attempt 1)"), said
    assert any(m.startswith(f"proved P0 of winning-post {job.job_id}: synthesis run ") and m.endswith("verified")
               for m in said), said
    assert said[-1].startswith(f"job done winning-post {job.job_id}: 1 partition(s)"), said
    assert {h for _, h, _, _ in mine} == {host}
    assert [(level, part) for level, _, part, m in mine if m.startswith(("claimed", "proved"))] == [("INFO", 0)] * 2
    assert all(other.job_id not in m for m in said)

    shown = page(job.job_id)
    assert f"claimed P0 of {job.job_id}" in shown and "job done winning-post" in shown
    assert f'<span class="host">{host}</span>' in shown and '<span class="part">P0</span>' in shown
    assert other.job_id not in shown  # another job's lines are its own page's


def line(job: str, message: str, partition: int | None = None) -> Line:
    return Line(job=job, at=datetime.now(UTC), level="INFO", message=message, host="host-a", partition=partition)


@pytest.mark.django_db
def test_the_ledger_keeps_the_newest_lines_of_each_job(make_job) -> None:
    busy, quiet = make_job(), make_job()
    assert job_log.append([line(busy.job_id, f"line {i}") for i in range(job_log.KEEP + 10)]) == job_log.KEEP + 10
    assert job_log.append([line(quiet.job_id, "the only line"), line("no-such-job", "dropped")]) == 1
    kept = list(JobLogLine.objects.filter(job=busy).order_by("pk").values_list("message", flat=True))
    assert kept == [f"line {i}" for i in range(10, job_log.KEEP + 10)]
    assert list(JobLogLine.objects.filter(job=quiet).values_list("message", flat=True)) == ["the only line"]


@pytest.mark.django_db
def test_a_jobs_page_shows_its_own_lines_only_oldest_first(make_job) -> None:
    mine, other = make_job(), make_job()
    job_log.append([line(mine.job_id, "first", 0), line(other.job_id, "not mine"), line(mine.job_id, "<b>second</b>")])
    shown = page(mine.job_id)
    assert shown.index("first") < shown.index("&lt;b&gt;second&lt;/b&gt;")  # escaped, in order
    assert "not mine" not in shown and 'data-lines="2"' in shown


# ---- the handler: bounded, never waits, never logs through itself ----------------------------


@pytest.fixture
def engine_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("engine")
    level = logger.level
    logger.setLevel(logging.INFO)
    yield logger
    logger.setLevel(level)


def test_the_handler_drops_and_counts_lines_past_its_bound_without_waiting(engine_logger: logging.Logger) -> None:
    release = threading.Event()
    batches: list[Sequence[Line]] = []

    def slow_ledger(lines: Sequence[Line]) -> int:
        batches.append(lines)
        release.wait(10)  # a database that stalls
        return len(lines)

    handler = JobLogHandler("host-a", append=slow_ledger, capacity=5, flush_seconds=0.01).attach(engine_logger)
    try:
        log.info("claimed P0 of job-1", extra=about("job-1", 0, "host-a"))
        wait_until(lambda: batches, timeout=5)  # the flusher is now stuck in the ledger
        started = time.perf_counter()
        for i in range(50):
            log.info("proved P%d of job-1", i, extra=about("job-1", i))
        log.info("not about a job")
        assert time.perf_counter() - started < 0.5, "logging waited for the ledger"
        assert handler.lines.qsize() == 5 and handler.dropped == 45
    finally:
        release.set()
        handler.stop()
    assert [ln.message for batch in batches for ln in batch] == ["claimed P0 of job-1"] + [f"proved P{i} of job-1"
                                                                                         for i in range(5)]
    assert handler.written == 6 and all(ln.host == "host-a" for batch in batches for ln in batch)


def test_the_flusher_does_not_collect_what_is_logged_while_it_writes(engine_logger: logging.Logger) -> None:
    written: list[str] = []

    def chatty_ledger(lines: Sequence[Line]) -> int:
        written.extend(ln.message for ln in lines)
        log.warning("deadlock retried for %s", lines[0].job, extra=about(lines[0].job))  # would loop forever
        return len(lines)

    handler = JobLogHandler("host-a", append=chatty_ledger, flush_seconds=0.01).attach(engine_logger)
    try:
        log.info("claimed P0 of job-2", extra=about("job-2", 0))
        wait_until(lambda: written, timeout=5)
        time.sleep(0.1)
    finally:
        handler.stop()
    assert written == ["claimed P0 of job-2"]


def test_a_failing_ledger_costs_lines_not_the_engine(engine_logger: logging.Logger) -> None:
    def broken(lines: Sequence[Line]) -> int:
        raise RuntimeError("database gone")

    handler = JobLogHandler("host-a", append=broken, flush_seconds=0.01).attach(engine_logger)
    try:
        log.error("finishing P0 failed", exc_info=ValueError("bad proof"), extra=about("job-3", 0))
        wait_until(lambda: handler.lost == 1, timeout=5)
    finally:
        handler.stop()


def test_an_exceptions_last_line_goes_with_its_message() -> None:
    handler = JobLogHandler("host-a", append=lambda lines: len(lines))
    try:
        raise ValueError("bad proof")
    except ValueError:
        record = log.makeRecord("engine.test", logging.ERROR, __file__, 1, "finishing P0 failed", (),
                                __import__("sys").exc_info(), extra=about("job-4", 0))
    handler.emit(record)
    assert handler.lines.get_nowait().message == "finishing P0 failed — ValueError: bad proof"


def test_the_process_handler_is_shared_by_its_engines_and_goes_with_the_last() -> None:
    engine_logger = logging.getLogger("engine")
    first = collector.take("host-a")
    second = collector.take("host-b")
    assert first is second and first in engine_logger.handlers
    flusher = first._flusher
    assert flusher is not None and flusher.is_alive()
    collector.let_go()
    assert first in engine_logger.handlers
    collector.let_go()
    assert first not in engine_logger.handlers
    flusher.join(5)
    assert not flusher.is_alive()


def test_the_handler_outlives_logging_being_configured_again(engine_logger: logging.Logger) -> None:
    """runengine --serve loads the web server after the engine starts, and django.setup's
    dictConfig then closes every handler and resets the engine logger's."""
    import logging.config

    from django.conf import settings

    written: list[str] = []

    def ledger(lines: Sequence[Line]) -> int:
        written.extend(ln.message for ln in lines)
        return len(lines)

    handler = JobLogHandler("host-a", append=ledger, flush_seconds=0.01).attach(engine_logger)
    try:
        logging.config.dictConfig(settings.LOGGING)
        engine_logger.setLevel(logging.INFO)
        wait_until(lambda: handler in engine_logger.handlers, timeout=5)
        log.info("claimed P0 of job-5", extra=about("job-5", 0))
        wait_until(lambda: written, timeout=5)
    finally:
        handler.stop()
    assert written == ["claimed P0 of job-5"] and handler not in engine_logger.handlers
