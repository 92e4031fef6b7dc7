"""The CPU as a Backend (backends.base), through the compiled kernels.

Two kinds of key: a ProvingKey of arrays (the engine's, kept hot, maybe with fixed-base tables:
array_launch, numpy's), whose launch computes as it is asked; and a MappedKey of buffers (a
.zkey mapped by the command line), whose launch here queues H and the MSMs and runs them on
one thread team at the first wait, through the kernels' Groth16 steps and with no array
library, giving each section's pages back once its MSM has planned (copied the live points).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.prover.backends.base import SECTIONS, Buffer, Evaluations, Handle, HostLaunch, Launch, MappedKey
from engine.prover.backends.cpu import groth16_native, native_build
from engine.prover.params.curves import get_curve

if TYPE_CHECKING:
    from engine.prover.keys import ProvingKey


# The pool's order: the largest MSM first (the plans alive at once are bounded, so the last
# one's windows run alone), G2; then H's, so H is made early and the domain's a, b, c freed.
POOL_ORDER = ("b2_points", "h_points", "a_points", "b1_points", "c_points")


class _Queued:
    """An MSM queued on a MappedLaunch: its first ``wait`` runs every queued job."""

    def __init__(self, launch: MappedLaunch, index: int) -> None:
        self.launch = launch
        self.index = index

    def wait(self) -> Buffer:
        return self.launch.run()[self.index]


class MappedLaunch(HostLaunch):
    """H and the MSMs over a MappedKey's buffers, queued as they are launched and run together
    on one thread team when the first is waited for (groth16_native.msm_pool), so one MSM's
    serial stretches (its plan, its last windows) are filled by another's work."""

    asynchronous = True  # the work runs at the first wait: launch them all first

    def __init__(self, key: MappedKey, threads: int) -> None:
        self.key = key
        self.curve = get_curve(key.curve)
        self.threads = threads
        self.jobs: list[tuple[str, Buffer, int]] = []  # section, scalars, first row
        self.results: dict[int, bytes] = {}
        self.evals: Evaluations | None = None
        self.h: Any = None

    def h_coset(self, evals: Evaluations) -> Buffer:
        # made in the pool, before the H MSM's plan: the scratch its scalars will be
        self.evals = evals
        self.h = groth16_native.scratch(self.curve, self.key.domain_size)
        return self.h

    def msm(self, section: str, scalars: Buffer, first_row: int = 0) -> Handle:
        self.jobs.append((section, scalars, first_row))
        return _Queued(self, len(self.jobs) - 1)

    def run(self) -> dict[int, bytes]:
        queued = sorted((i for i in range(len(self.jobs)) if i not in self.results),
                        key=lambda i: POOL_ORDER.index(self.jobs[i][0]))
        if queued:
            jobs = [(SECTIONS[sec], getattr(self.key, sec), sc, first)
                    for sec, sc, first in (self.jobs[i] for i in queued)]
            points = groth16_native.msm_pool(self.curve, jobs, self.threads, h=self.h, evals=self.evals,
                                             domain_size=self.key.domain_size, mapped=self.key.mapped)
            self.results.update(zip(queued, points, strict=True))
            self.evals = None  # H is made
        return self.results

    def close(self) -> None:
        self.evals = self.h = None


class CpuBackend:
    name = "cpu"

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads

    def launch(self, key: ProvingKey | MappedKey | Any) -> Launch:
        if isinstance(key, MappedKey):
            return MappedLaunch(key, native_build.default_threads() if self.threads is None else self.threads)
        from engine.prover.backends.cpu.array_launch import ArrayLaunch

        return ArrayLaunch(key, self.threads)
