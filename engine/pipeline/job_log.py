"""Collects the engine's log lines about jobs and hands them to the ledger's job log.

A logging handler on the ``engine`` logger keeps the records that carry a job
(``extra=engine.ledger.job_log.about(...)``) and queues them; a background thread hands the
queue to ``engine.ledger.job_log.append`` every ``flush_seconds``. Logging must never slow or
block the pipeline that logs: ``emit`` only formats the line and puts it on a bounded queue,
without waiting; a line that finds the queue full is dropped and counted (``dropped``). The
flusher's own records (the database's, a deadlock retry's) are never collected, so the handler
cannot log through itself.

One handler per process, shared by the engines in it (the tests run several): each engine
takes it on start and lets it go on stop; the last one out flushes what is left and removes it.
Django configures logging again when the web server loads in the engine's process
(``runengine --serve``: get_asgi_application runs django.setup, whose dictConfig closes every
handler and resets the ``engine`` logger's): the handler outlives that, and its flusher puts it
back on the logger, so only ``stop`` ends it.
"""

from __future__ import annotations

import logging
import queue
import threading
import traceback
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from django.db import close_old_connections, connection

from engine.ledger import job_log
from engine.ledger.job_log import Line

log = logging.getLogger("engine")

CAPACITY = 2000  # lines waiting at most: a few seconds of a very chatty engine
FLUSH_SECONDS = 0.5
BATCH = 500  # lines per call to the ledger


class JobLogHandler(logging.Handler):
    def __init__(self, host: str, append: Callable[[Sequence[Line]], int] = job_log.append,
                 capacity: int = CAPACITY, flush_seconds: float = FLUSH_SECONDS) -> None:
        super().__init__()
        self.host = host  # for a line that does not say which host logged it
        self.append = append
        self.flush_seconds = flush_seconds
        self.lines: queue.Queue[Line] = queue.Queue(maxsize=capacity)
        self._counts = threading.Lock()
        self.dropped = 0  # lines that found the queue full
        self._reported = 0  # of those, how many the engine's log was told of
        self.lost = 0  # lines the ledger could not write
        self.written = 0
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self._logger: logging.Logger | None = None

    # -- the logging side: never waits --------------------------------------------------------

    def emit(self, record: logging.LogRecord) -> None:
        job = getattr(record, "job", None)
        if job is None or (self._flusher is not None and record.thread == self._flusher.ident):
            return
        try:
            line = Line(job=str(job), at=datetime.fromtimestamp(record.created, UTC), level=record.levelname,
                        message=_text(record), host=str(getattr(record, "host", None) or self.host),
                        partition=_index(getattr(record, "partition", None)))
        except Exception:
            self.handleError(record)
            return
        try:
            self.lines.put_nowait(line)
        except queue.Full:
            with self._counts:
                self.dropped += 1

    # -- the flusher --------------------------------------------------------------------------

    def attach(self, logger: logging.Logger) -> JobLogHandler:
        """Collect ``logger``'s lines (and its children's) and start flushing them."""
        self._logger = logger
        logger.addHandler(self)
        self._flusher = threading.Thread(target=self._run, name="job-log", daemon=True)
        self._flusher.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.flush_seconds):
                self._stay_attached()
                self.hand_over()
                self._report_drops()
            self.hand_over()  # what the engine said as it stopped
            self._report_drops()
        finally:
            connection.close()

    def _stay_attached(self) -> None:
        """Back on the logger if a logging reconfiguration took it off (see the module's note)."""
        if self._logger is not None and self not in self._logger.handlers:
            self._logger.addHandler(self)

    def hand_over(self) -> None:
        """Hand every queued line to the ledger, a batch at a time. (Not ``flush``: logging
        calls that on every handler from whatever thread reconfigures it, or exits.)"""
        while True:
            batch: list[Line] = []
            try:
                while len(batch) < BATCH:
                    batch.append(self.lines.get_nowait())
            except queue.Empty:
                pass
            if not batch:
                return
            try:
                written = self.append(batch)
            except Exception as exc:  # a database hiccup costs these lines, not the engine
                with self._counts:
                    self.lost += len(batch)
                # No job fields: this line goes to the engine's log, not round again.
                log.warning("job log: %d line(s) not recorded: %s: %s", len(batch), type(exc).__name__, exc)
                close_old_connections()
                continue
            with self._counts:
                self.written += written

    def _report_drops(self) -> None:
        """Say so in the engine's log when lines were dropped since the last report."""
        with self._counts:
            dropped, self._reported = self.dropped - self._reported, self.dropped
        if dropped:  # no job fields: this line is the engine's, not a job's
            log.warning("job log: %d line(s) dropped, the queue of %d was full", dropped, self.lines.maxsize)

    def close(self) -> None:
        """What logging.shutdown and dictConfig call on every handler: the job log carries on
        (``stop`` ends it)."""

    def stop(self) -> None:
        """Flush what is queued, stop the flusher and leave the logger (idempotent)."""
        self._stop.set()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join(timeout=10)
        if self._logger is not None:
            self._logger.removeHandler(self)
        super().close()


def _text(record: logging.LogRecord) -> str:
    message = record.getMessage()
    if record.exc_info and record.exc_info[1] is not None:
        # The exception's last line; its traceback stays in the engine's own log.
        message += " — " + traceback.format_exception_only(record.exc_info[1])[-1].strip()
    return message


def _index(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---- one per process --------------------------------------------------------------------------

_lock = threading.Lock()
_handler: JobLogHandler | None = None
_users = 0


def take(host: str) -> JobLogHandler:
    """The process's handler, on the ``engine`` logger and flushing (started by the first taker)."""
    global _handler, _users
    with _lock:
        if _handler is None:
            _handler = JobLogHandler(host).attach(logging.getLogger("engine"))
        _users += 1
        return _handler


def let_go() -> None:
    """One taker is done; the last removes the handler and flushes what is queued."""
    global _handler, _users
    with _lock:
        _users = max(_users - 1, 0)
        if _users or _handler is None:
            return
        handler, _handler = _handler, None
    handler.stop()
