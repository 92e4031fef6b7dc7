"""The CPU backend's launch over a ProvingKey of arrays (the engine's keys): H through
native.h_coset, each MSM through the key's fixed-base table where it carries one
(fixed_base), else Pippenger over its live bases read in place. numpy's, so loaded only when
such a key is proved."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.prover.backends.base import Buffer, Evaluations, Handle, HostLaunch, Ready
from engine.prover.backends.cpu import fixed_base, native

if TYPE_CHECKING:
    from engine.prover.keys import ProvingKey


class ArrayLaunch(HostLaunch):
    """Holds nothing of its own: H and the witness stay host arrays the caller owns."""

    def __init__(self, key: ProvingKey, threads: int | None) -> None:
        self.key = key
        self.threads = threads

    def h_coset(self, evals: Evaluations) -> Buffer:
        return native.h_coset(self.key.curve, *evals, threads=self.threads)

    def msm(self, section: str, scalars: Buffer, first_row: int = 0) -> Handle:
        return Ready(fixed_base.msm(self.key, section, scalars[first_row:]))

    def msm_batch(self, section: str, scalars: Buffer, first_row: int = 0) -> list[Handle]:
        # one pass over the section's points for all the vectors (the batch kernels)
        return [Ready(p) for p in fixed_base.msm_batch(self.key, section, [v[first_row:] for v in scalars])]
