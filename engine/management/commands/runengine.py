"""``manage.py runengine``: the proving engine of this host (and, with --serve, the web too).

SIGTERM or Ctrl-C: no new claims; in-flight work finishes within DRAIN_SECONDS or is handed
back to the queue for another host; exit 0. A second one while it drains hands everything back
at once and exits 130 (as a shell reports an interrupted command). A thread of the engine that dies (anything but a
database error, which it rides out) stops the heartbeat, hands back what the host holds and
exits 70, for a supervisor to start the engine again.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser
from django.db import connection

from engine.management.commands._common import RecordsCommand, build_kernels
from engine.models import ProofJob
from engine.pipeline.host import Engine, EngineConfig


class Command(RecordsCommand):
    help = "Run the proving engine: claim, synthesize, prove, verify, record."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--budget", help="host memory budget: auto or a size such as 64GiB")
        parser.add_argument("--synthesis", type=int, help="synthesis processes")
        parser.add_argument("--workers-per-device", type=int, help="GPU workers per device (default 2)")
        parser.add_argument("--devices", help="auto, cpu, or cuda:0,cuda:1")
        parser.add_argument("--scale", choices=("tiny", "small", "medium", "large"), help="circuit scale")
        parser.add_argument("--host-name", help="this host's name in the records")
        parser.add_argument("--no-split", action="store_true", help="split proving off (benchmarks)")
        parser.add_argument("--serve", action="store_true", help="also run Daphne (console, API) in this process")
        parser.add_argument("--host", default="127.0.0.1", help="address Daphne listens on (with --serve)")
        parser.add_argument("--port", type=int, default=8000, help="port Daphne listens on (with --serve)")
        parser.add_argument("--demo", action=argparse.BooleanOptionalAction, default=False,
                            help="submit a handful of demo jobs of every kind when the database has no jobs yet")
        parser.add_argument("--demo-per-kind", type=int, default=1, metavar="N",
                            help="with --demo: how many demo jobs of each kind (default 1)")
        parser.add_argument("--once", action="store_true", help="exit when the queue is empty")
        parser.add_argument("--drain-seconds", type=float, help="how long SIGTERM waits for in-flight work")

    def handle(self, *args: Any, **opts: Any) -> None:
        config = EngineConfig.from_settings(
            budget=opts["budget"], synthesis=opts["synthesis"], workers_per_device=opts["workers_per_device"],
            devices=opts["devices"], scale=opts["scale"], host_name=opts["host_name"],
            split=False if opts["no_split"] else None)
        drain = opts["drain_seconds"]
        drain = float(settings.PROVINGSITE["DRAIN_SECONDS"]) if drain is None else drain
        interrupts = Interrupts(self.stdout, drain)
        stop = interrupts.stop
        if opts["serve"]:
            port_is_free(opts["host"], opts["port"])  # before the engine claims any work
            import daphne.server  # noqa: F401 - installs the asyncio reactor before anything imports Twisted

            # The console answers at once, the demo jobs already queued on it; the kernels build
            # (a first start: a while) and the engine starts behind it, and the console shows the
            # host when it is up.
            interrupts.install()
            self._demo(config, opts)
            behind = StartBehind(lambda: self._start(config, opts, interrupts), stop)
            behind.start()
            self._serve(behind, opts["host"], opts["port"], stop, drain)
            behind.raise_failure()
            if interrupts.engine is not None:
                exit_if_dead(interrupts.engine)
            return
        build_kernels(self.stdout, config.devices)  # a first start compiles for minutes: say so, not go quiet
        # From here a SIGTERM or Ctrl-C drains, even one that comes while the engine starts or
        # the demo jobs go in: either used to end the process by the default action (a
        # traceback, undrained, its output unflushed).
        interrupts.install()
        self._demo(config, opts)
        engine = self._start(config, opts, interrupts, build=False)
        assert engine is not None  # built before: only a build is cut short by a stop
        if opts["once"]:
            def idle_then_stop() -> None:
                engine.run_until_idle()
                stop.set()

            waiter = threading.Thread(target=idle_then_stop, daemon=True)
            waiter.start()
        while not stop.wait(0.5):
            pass
        end(engine, drain)
        exit_if_hurried(engine)

    def _start(self, config: EngineConfig, opts: dict[str, Any], interrupts: Interrupts,
               build: bool = True) -> Engine | None:
        """Build the kernels (unless built) and start the engine; None when a stop came while
        the kernels built (nothing started, nothing to drain)."""
        if build:
            build_kernels(self.stdout, config.devices)  # a first start compiles for minutes: say so
            if interrupts.stop.is_set():
                return None
        engine = Engine(config).start()
        interrupts.engine = engine
        watch_for_death(engine, interrupts.stop)
        return engine

    def _demo(self, config: EngineConfig, opts: dict[str, Any]) -> None:
        """The demo jobs, if asked and the database holds no jobs yet: queued before the engine
        starts, which claims them as soon as it is up."""
        if opts["demo"] and ProofJob.objects.exists():
            self.stdout.write("the database already holds jobs: no demo jobs added")
        elif opts["demo"]:
            from engine.ledger.demo import submit_demo_jobs

            jobs = submit_demo_jobs(config.scale, per_kind=max(1, opts["demo_per_kind"]))
            self.stdout.write(f"submitted {len(jobs)} demo job(s) at scale {config.scale}")

    def _serve(self, behind: StartBehind, host: str, port: int, stop: threading.Event, drain: float) -> None:
        """The project's web server (settings.WEB_SERVER) in this thread; the engine's hints go through its loop."""
        from django.conf import settings
        from django.utils.module_loading import import_string
        from twisted.internet import reactor

        from engine.ledger import hints

        build_server = import_string(settings.WEB_SERVER)

        def ready() -> None:
            hints.set_event_loop(reactor._asyncioEventloop)
            self.stdout.write(f"console and API on http://{host}:{port}/")

        def drain_then_stop() -> None:
            stop.wait()
            engine = behind.wait()  # a stop while the kernels build waits for them (a second one does not)
            if engine is not None:
                end(engine, drain, exit_now=False)
                exit_if_hurried(engine)
            hints.set_event_loop(None)
            # twisted types the global reactor as its interface class: mypy reads stop as unbound.
            reactor.callFromThread(reactor.stop)  # type: ignore[misc]

        threading.Thread(target=drain_then_stop, name="drain", daemon=True).start()
        build_server(host, port, signal_handlers=False, ready_callable=ready).run()


class StartBehind:
    """The engine's start (``starting``) in a thread of its own, beside the web server: what it
    raises stops the process (``raise_failure`` in the main thread, once the server is down)."""

    def __init__(self, starting: Callable[[], Engine | None], stop: threading.Event) -> None:
        self.starting = starting
        self.stop = stop
        self.engine: Engine | None = None
        self.failure: BaseException | None = None
        self._done = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="engine-start", daemon=True).start()

    def _run(self) -> None:
        try:
            self.engine = self.starting()
        except BaseException as exc:  # noqa: BLE001 - said by the main thread, as a command error
            self.failure = exc
            self.stop.set()
        finally:
            connection.close()  # this thread's own; the engine's threads open theirs
            self._done.set()

    def wait(self) -> Engine | None:
        self._done.wait()
        return self.engine

    def raise_failure(self) -> None:
        if self.failure is None:
            return
        if isinstance(self.failure, CommandError):
            raise self.failure
        raise CommandError(f"the engine did not start: {type(self.failure).__name__}: {self.failure}") from self.failure


class Interrupts:
    """SIGTERM or Ctrl-C: the first drains (and says how much and for how long), the second stops
    now. The handler runs in the main thread between two steps of whatever it was doing; it only
    sets events and writes a line."""

    def __init__(self, out: Any, drain: float) -> None:
        self.out = out
        self.drain = drain
        self.stop = threading.Event()
        self.engine: Engine | None = None

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.received)

    def received(self, signum: int, _frame: Any) -> None:
        engine = self.engine
        if not self.stop.is_set():
            self.stop.set()
            held = engine.in_flight if engine is not None else 0
            again = "Ctrl-C" if signum == signal.SIGINT else "the signal"
            self.say(f"stopping: finishing {held} partition(s) (at most {self.drain:.0f} s); {again} again to stop now")
            return
        if engine is None:  # still starting: it holds nothing yet
            self.say("stopping now")
            sys.stdout.flush()
            os._exit(EXIT_INTERRUPTED)
        if engine.hurried:
            return
        self.say(f"stopping now: handing back {engine.in_flight} partition(s)")
        engine.hurry()

    def say(self, line: str) -> None:
        # The signal may have cut into a write of this same thread's to the same stream, which
        # a second write would re-enter (RuntimeError): the line is lost then, not the stop.
        with contextlib.suppress(RuntimeError):
            self.out.write(line)


# Stopped at once by a second interrupt: 128 + SIGINT, what a shell reports for Ctrl-C.
EXIT_INTERRUPTED = 130


def exit_if_hurried(engine: Engine) -> None:
    """After a stop that did not wait for the threads still proving: exit without joining them
    (their partitions are back in the queue)."""
    if not engine.hurried:
        return
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


# A thread of the engine died (engine.pipeline.supervise): EX_SOFTWARE, for the supervisor
# (systemd's Restart=on-failure, a container's restart policy) to start the engine again.
EXIT_THREAD_DIED = 70


def watch_for_death(engine: Engine, stop: threading.Event) -> None:
    """A thread that died ends the wait as a signal would."""
    def watch() -> None:
        engine.health.death.wait()
        stop.set()

    threading.Thread(target=watch, name="death-watch", daemon=True).start()


def end(engine: Engine, drain: float, exit_now: bool = True) -> None:
    """Drain and stop; or, after a thread died, give back what is held and (``exit_now``) exit
    non-zero at once: the process is in no state to drain."""
    if not engine.health.death.is_set():
        engine.stop(drain)
        return
    engine.abort()
    if exit_now:
        exit_if_dead(engine)


def exit_if_dead(engine: Engine) -> None:
    if not engine.health.death.is_set():
        return
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # os._exit: the synthesis pool's and the finalizers' exit hooks would wait on threads of an
    # engine that is in no state to end them.
    os._exit(EXIT_THREAD_DIED)


def port_is_free(host: str, port: int) -> None:
    """Refuse at once, in one line, to start on an address another process holds."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Twisted's listener does
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
