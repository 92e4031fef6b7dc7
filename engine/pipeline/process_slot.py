"""One synthesis process and the pipe to it: calls go in one at a time, results come back.

What the engine used of a one-process ProcessPoolExecutor (submit, a broken flag, shutdown)
without its two helper threads. The executor handed each call to a queue-feeder thread and
each result to a manager thread, and every hand-over between threads waited for the GIL while
the engine's provers held it: on one core a medium partition's synthesis was recorded 18 ms
for 6 ms of work. Here the submitting thread writes the call to the pipe itself when the
process is idle, and one reader thread per process receives the result, resolves the call's
future (its callbacks run there) and sends the next waiting call.

A call still waiting when the slot shuts down with ``cancel`` is cancelled, as the executor's
``cancel_futures`` did; a process that ends (killed for memory, crashed) fails the call it ran
and every waiting one with BrokenProcessPool, and the slot stays broken (the engine starts
another in its place).
"""

from __future__ import annotations

import collections
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from engine.pipeline import synthesis_process


class ProcessSlot:
    """One spawned process running ``synthesis_process.serve`` (see the module)."""

    def __init__(self, initargs: tuple[Any, ...], name: str = "synthesis") -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe(duplex=True)
        # A daemon: an engine that exits without stopping its slots does not wait for them.
        self.process = context.Process(target=synthesis_process.serve, args=(child, *initargs), name=name,
                                       daemon=True)
        self.process.start()
        child.close()
        self._lock = threading.Lock()
        self._running: Future[Any] | None = None
        self._waiting: collections.deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = collections.deque()
        self._closing = False
        self.broken = False
        self._reader = threading.Thread(target=self._read, name=f"{name}-results", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """``fn(*args)`` in the process, after the calls before it; its future."""
        future: Future[Any] = Future()
        with self._lock:
            if self.broken or self._closing:
                raise BrokenProcessPool("the synthesis process has ended" if self.broken else "the slot is shutting down")
            if self._running is None:
                self._send(future, fn, args)
            else:
                self._waiting.append((future, fn, args))
        return future

    def _send(self, future: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """Under the lock: the call to the idle process (unless it was cancelled meanwhile)."""
        if not future.set_running_or_notify_cancel():
            return
        self._running = future
        try:
            self._conn.send((fn, args))
        except (OSError, ValueError):  # the process is gone: the reader fails the call
            pass
        except Exception as exc:  # noqa: BLE001 - arguments that do not pickle: this call fails, not the slot
            self._running = None
            future.set_exception(exc)

    def _read(self) -> None:
        while True:
            try:
                ok, value = self._conn.recv()
            except (EOFError, OSError):
                break
            except Exception as exc:  # noqa: BLE001 - read whole but did not unpickle: that call fails
                ok, value = False, RuntimeError(f"the synthesis process's answer could not be read: {exc}")
            with self._lock:
                future, self._running = self._running, None
                while self._waiting and self._running is None:
                    self._send(*self._waiting.popleft())
                if self._closing and self._running is None:
                    self._stop_when_idle()
            if future is not None:
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
        self._ended()

    def _ended(self) -> None:
        """The process ended (or shut down): what it ran and what waited fail, unless cancelled."""
        with self._lock:
            self.broken = not self._closing
            lost = [self._running] if self._running is not None else []
            lost += [future for future, _, _ in self._waiting]
            self._running = None
            self._waiting.clear()
        for future in lost:
            if not future.done():  # a waiting call cancelled meanwhile is done
                future.set_exception(BrokenProcessPool("the synthesis process ended abruptly"))

    def shutdown(self, wait: bool = True, cancel: bool = False) -> None:
        """Stop taking calls; with ``cancel`` the waiting ones are cancelled (the running one
        finishes); the process exits after its last call, waited for with ``wait``."""
        with self._lock:
            self._closing = True
            if cancel:
                for future, _, _ in self._waiting:
                    future.cancel()
                self._waiting.clear()
            if cancel or (self._running is None and not self._waiting):
                self._stop_when_idle()
        if wait:
            self._reader.join()
            self.process.join()

    def _stop_when_idle(self) -> None:
        """Under the lock (one writer of the pipe at a time): the process is told to exit once
        it has answered what it runs (a None after it)."""
        try:
            self._conn.send(None)
        except (OSError, ValueError):
            pass
