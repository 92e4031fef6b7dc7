"""The Groth16 prover: setup, split proving (start/finish), verification, snarkjs files.

Importing this package costs nothing: the names below load their module (numpy, the native
kernels, CuPy) on first use, so the command line's --help and `import engine.prover.cli`
stay in milliseconds; nor does it change the process's environment (an application sets its
thread pools' with ``engine.prover.config.process_defaults``). ``setup`` and ``verify`` are modules here, as everywhere: their
functions are ``engine.prover.setup.setup`` and ``engine.prover.verify.verify``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.prover.datatypes import UnsatisfiedConstraint
    from engine.prover.groth16 import (
        PendingProof,
        Proof,
        ProofAborted,
        assignment_from_r1cs,
        assignment_from_witness,
        gpu_prove_finish,
        gpu_prove_launch,
        gpu_prove_launch_batch,
        gpu_prove_stage,
        gpu_prove_stage_batch,
        gpu_prove_start,
        gpu_prove_start_batch,
        prove,
    )
    from engine.prover.keys import ProvingKey, VerifyingKey
    from engine.prover.setup import DEV_SETUP_NOTICE
    from engine.prover.snarkjs import (
        FormatError,
        read_r1cs,
        read_wtns,
        read_zkey,
        write_wtns,
        write_zkey,
    )
    from engine.prover.verify import InvalidProof

_HOMES = {
    **dict.fromkeys(
        ("PendingProof", "Proof", "ProofAborted", "assignment_from_r1cs",
         "assignment_from_witness", "gpu_prove_finish", "gpu_prove_launch", "gpu_prove_launch_batch",
         "gpu_prove_stage", "gpu_prove_stage_batch", "gpu_prove_start", "gpu_prove_start_batch", "prove"),
        "engine.prover.groth16",
    ),
    "UnsatisfiedConstraint": "engine.prover.datatypes",
    **dict.fromkeys(("ProvingKey", "VerifyingKey"), "engine.prover.keys"),
    "DEV_SETUP_NOTICE": "engine.prover.setup",
    **dict.fromkeys(("FormatError", "read_r1cs", "read_wtns", "read_zkey", "write_wtns", "write_zkey"),
                    "engine.prover.snarkjs"),
    "InvalidProof": "engine.prover.verify",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


def select_device(preferred: str | None = None) -> str:
    """"cuda:0" when a GPU is usable, else "cpu"; an explicit choice (argument, then the
    configuration's device: engine.prover.config) wins. "auto" means: choose."""
    from engine.prover.config import current

    choice = preferred or current().device
    if choice != "auto":
        if choice != "cpu" and not (choice.startswith("cuda:") and choice[5:].isdigit()):
            raise ValueError(f"unknown device {choice!r}; expected 'cpu', 'cuda:N' or 'auto'")
        return choice
    from engine.prover.backends.driver import nvidia_driver_present

    if not nvidia_driver_present():
        return "cpu"  # without the driver CUDA sees no device: no need to import CuPy to learn it
    try:
        from engine.prover.backends import cuda

        return "cuda:0" if cuda.gpu_available() else "cpu"
    except Exception:  # CuPy missing or broken: the CPU path always works
        return "cpu"


__all__ = [
    "DEV_SETUP_NOTICE",
    "FormatError",
    "InvalidProof",
    "PendingProof",
    "Proof",
    "ProofAborted",
    "ProvingKey",
    "UnsatisfiedConstraint",
    "VerifyingKey",
    "assignment_from_r1cs",
    "assignment_from_witness",
    "gpu_prove_finish",
    "gpu_prove_launch",
    "gpu_prove_launch_batch",
    "gpu_prove_stage",
    "gpu_prove_stage_batch",
    "gpu_prove_start",
    "gpu_prove_start_batch",
    "prove",
    "read_r1cs",
    "read_wtns",
    "read_zkey",
    "select_device",
    "write_wtns",
    "write_zkey",
]

