"""What runs inside the synthesis pool's processes.

Kept apart from engine.synthesize (which imports the models) because a spawned process
unpickles the function before its initializer has set Django up: this module must import
with nothing but the standard library at the top.
"""

from __future__ import annotations

import time
from typing import Any


def init_worker() -> None:
    """Pool processes are spawned (never forked from a threaded engine): set Django up."""
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "provingsite.settings")
    django.setup()
    from engine.circuits.synthesis import configure_worker

    configure_worker(1)  # one native product thread per process: the pool's size is the parallelism


def synthesize_builtin(circuit_id: str, inputs: dict[str, Any], index: int) -> tuple[Any, float]:
    from engine.circuits.synthesis import synthesize_partition

    started = time.perf_counter()
    assignment = synthesize_partition(circuit_id, inputs, index)
    return assignment, time.perf_counter() - started


def synthesize_custom(upload_dir: str) -> tuple[Any, float]:
    """A custom circuit's assignment from its snarkjs witness (no circuit code to run)."""
    from pathlib import Path

    from engine.prover import assignment_from_witness, read_wtns, read_zkey

    started = time.perf_counter()
    pk = read_zkey(Path(upload_dir) / "circuit.zkey")
    witness = read_wtns(Path(upload_dir) / "witness.wtns", pk.curve)
    return assignment_from_witness(pk, witness), time.perf_counter() - started


def nothing() -> None:
    """Submitted once per process at start, so every process is up before work arrives."""
