"""What several commands share: the refusal of a database not yet migrated, the hint when no
engine runs, and the kernel build's progress. (A leading underscore: Django does not take this
module for a command.)"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from engine.models import EngineHost, ProofJob
from engine.status.farm import stale_after_seconds


class RecordsCommand(BaseCommand):
    """A command that reads or writes the records: on a database with migrations still to apply
    it stops before its first query, in one line naming the fix, where Django would only warn
    and the command would then end in a traceback about a missing table."""

    requires_migrations_checks = True

    def check_migrations(self) -> None:
        from django.db.migrations.executor import MigrationExecutor

        connection = connections[DEFAULT_DB_ALIAS]
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        if plan:
            where = connection.settings_dict["NAME"]
            raise CommandError(f"the database ({where}) is not migrated: {len(plan)} migration(s) to apply; "
                               "run `manage.py migrate` (bin/setup does) first")


START_ENGINE = "`manage.py runengine` (or `bin/run`: the console and an engine in one process)"


def live_hosts() -> list[EngineHost]:
    """Hosts that have not stopped and beat recently: the console's rule for a host that is up."""
    fresh_since = timezone.now() - timedelta(seconds=stale_after_seconds())
    return list(EngineHost.objects.filter(stopped_at__isnull=True, heartbeat_at__gte=fresh_since))


def no_engine_hint() -> str | None:
    """How to start an engine, when none is up (queued work would wait for ever); None when one is."""
    if live_hosts():
        return None
    return f"no engine is running: start one with {START_ENGINE}"


def jobs_named(job_ids: list[str], refused: list[str]) -> Iterator[ProofJob]:
    """Each job named on the command line, in order; a name no job has goes into ``refused``."""
    for job_id in job_ids:
        job = ProofJob.objects.filter(job_id=job_id).first()
        if job is None:
            refused.append(f"no job with id {job_id!r}")
            continue
        yield job


def with_progress[T](out: Any, what: str, work: Callable[[], T], *, announce_after: float = 1.0,
                  every: float = 10.0) -> T:
    """Run ``work``; if it is still running after ``announce_after`` seconds, say what it is
    doing, then how long it has taken every ``every`` seconds, and the total at the end.

    A quick call (a cached kernel module loaded in milliseconds) prints nothing, so the line
    appears exactly when there is a wait to explain, without knowing in advance if there is one.
    """
    finished = threading.Event()
    announced = threading.Event()
    started = time.monotonic()

    def talk() -> None:
        if finished.wait(announce_after):
            return
        out.write(f"{what} …\n")
        out.flush()
        announced.set()
        while not finished.wait(every):
            out.write(f"  … {time.monotonic() - started:.0f} s\n")
            out.flush()

    speaker = threading.Thread(target=talk, name="progress", daemon=True)
    speaker.start()
    try:
        result = work()
    finally:
        finished.set()
        speaker.join()
    if announced.is_set():
        out.write(f"{what}: done in {time.monotonic() - started:.0f} s\n")
        out.flush()
    return result


def build_kernels(out: Any, devices: str = "cpu") -> None:
    """Compile the kernels now, saying so, rather than silently inside the first proof.

    The CPU kernels always (synthesis uses them too); the GPU kernels for each CUDA device the
    ``devices`` setting names (auto, cpu, cuda:0,…). Each build happens once per kernel source
    (cached under CACHE_DIR/kernels, shared by every process under a file lock); later starts
    load the cached module in milliseconds and print nothing."""
    from engine.prover.backends.cpu import native

    with_progress(out, "building the CPU kernels (one time, about a minute on a small machine)",
                  lambda: native.build())
    for arch in gpu_archs(devices):
        from engine.prover.backends import cuda

        with_progress(out, f"compiling the GPU kernels for {arch} with NVRTC (one time, a few minutes)",
                      functools.partial(cuda.compile_for_arch, arch))


def gpu_archs(devices: str) -> list[str]:
    """The distinct ``sm_XX`` of the CUDA devices named; none when there are none (or the
    setting is wrong: the engine's own start then says which device is missing)."""
    from engine.pipeline import devices as devices_mod

    try:
        named = [d for d in devices_mod.discover(devices) if d.is_gpu]
        if not named:
            return []
        import cupy

        return sorted({f"sm_{cupy.cuda.Device(int(d.name.split(':')[1])).compute_capability}" for d in named})
    except Exception:  # no CuPy, no driver, a device not there: nothing to build here
        return []
