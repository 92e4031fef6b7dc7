"""The CPU as a Backend (backends.base), through the compiled kernels.

The CPU computes as it is asked, so every handle it returns is already done. Two kinds of key:
a ProvingKey of arrays (the engine's, kept hot, maybe with fixed-base tables: array_launch,
numpy's) and a MappedKey of buffers (a .zkey mapped by the command line): its launch here
runs the kernels' Groth16 steps over the mapped sections with no array library, giving each
section's pages back once its MSM has planned (copied the live points).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.prover.backends.base import SECTIONS, Buffer, Evaluations, Handle, HostLaunch, Launch, MappedKey, Ready
from engine.prover.backends.cpu import groth16_native, native_build
from engine.prover.params.curves import get_curve

if TYPE_CHECKING:
    from engine.prover.keys import ProvingKey


class MappedLaunch(HostLaunch):
    """H and the MSMs over a MappedKey's buffers; H lives on the C heap until its MSM. A batch
    is its proofs one by one: a mapped section is given back after each MSM."""

    def __init__(self, key: MappedKey, threads: int) -> None:
        self.key = key
        self.curve = get_curve(key.curve)
        self.threads = threads

    def h_coset(self, evals: Evaluations) -> Buffer:
        a, b, c = evals
        return groth16_native.h_coset(self.curve, a, b, c, self.key.domain_size, self.threads)

    def msm(self, section: str, scalars: Buffer, first_row: int = 0) -> Handle:
        return Ready(groth16_native.msm(self.curve, SECTIONS[section], getattr(self.key, section), scalars,
                                        self.threads, first_row=first_row, mapped=self.key.mapped))


class CpuBackend:
    name = "cpu"
    asynchronous = False

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads

    def launch(self, key: ProvingKey | MappedKey | Any) -> Launch:
        if isinstance(key, MappedKey):
            return MappedLaunch(key, native_build.default_threads() if self.threads is None else self.threads)
        from engine.prover.backends.cpu.array_launch import ArrayLaunch

        return ArrayLaunch(key, self.threads)
