"""The prover's configuration: one explicit object, read from the environment by default.

``ProverConfig`` says where compiled kernels are kept, which device ``select_device`` picks when
asked to choose, and which CPU kernel variant loads. A bare library user or the command line
gets ``ProverConfig.from_env()`` (PROVINGSITE_CACHE_DIR, else <repo>/.cache;
PROVINGSITE_DEVICE; PROVINGSITE_KERNEL_ISA); an embedding application builds its own and
installs it once with ``configure`` (the engine does at start-up, from its settings, in every
process it runs). Compiled kernels are per process, so the configuration is too.

``process_defaults`` is for an application's start, before numpy and the kernels load: the
thread pools' environment (one BLAS thread, OpenMP threads that sleep when idle). The library
itself never writes the process's environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[2]
DEVICE_ENV = "PROVINGSITE_DEVICE"
ISA_ENV = "PROVINGSITE_KERNEL_ISA"  # force a CPU kernel variant ("generic" or "bmi2-adx"), e.g. to compare them
CACHE_ENV = "PROVINGSITE_CACHE_DIR"


class ProverConfig(NamedTuple):  # not a dataclass: its import (inspect) is 10 ms of a small proof's command
    cache_dir: Path  # compiled CPU kernels, GPU cubins, the emulated grid's build
    device: str = "auto"  # "auto" (a GPU when usable), "cpu" or "cuda:N"
    isa: str = ""  # a CPU kernel variant (native_build.ISA_FLAGS); "": the fastest this CPU runs

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> ProverConfig:
        raw = environ.get(CACHE_ENV, "").strip()
        return cls(cache_dir=Path(raw).expanduser().resolve() if raw else REPO_ROOT / ".cache",
                   device=environ.get(DEVICE_ENV, "").strip() or "auto",
                   isa=environ.get(ISA_ENV, "").strip())

    def but(self, **changes: object) -> ProverConfig:
        """This configuration with some fields changed."""
        return self._replace(**changes)  # type: ignore[arg-type]


_installed: ProverConfig | None = None


def configure(config: ProverConfig | None) -> None:
    """Use ``config`` in this process from now on; None goes back to the environment's."""
    global _installed
    _installed = config


@contextmanager
def using(config: ProverConfig) -> Iterator[ProverConfig]:
    """``config`` for the enclosed code, then whichever was in use before."""
    global _installed
    before, _installed = _installed, config
    try:
        yield config
    finally:
        _installed = before


def current() -> ProverConfig:
    """The installed configuration, else the environment's as it is now."""
    return _installed if _installed is not None else ProverConfig.from_env()


def process_defaults() -> None:
    """For an application's start, before numpy and the kernels load; the process's own
    settings win. numpy's OpenBLAS starts a thread per core at import, and they spin for their
    first moments against the kernels' OpenMP threads (3 % of a 2^16 proof on 2 cores, measured
    with perf); the prover asks numpy for elementwise work only, never BLAS, so one is enough.
    libgomp's idle threads spin by default: on a shared, oversubscribed host that cost 2-3x
    (h_coset 2^16 on 2 busy cores, 2.4 s active vs 0.7 s passive), and the service runs
    synthesis pools beside the kernels."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
