"""The Groth16 prover: setup, split proving (start/finish), verification, snarkjs files.

Heavy modules (native kernels, CuPy) load on first use, so importing this package is cheap.
"""

from __future__ import annotations

import os

from engine.prover.groth16 import (
    PendingProof,
    Proof,
    ProofAborted,
    UnsatisfiedConstraint,
    assignment_from_r1cs,
    assignment_from_witness,
    gpu_prove_finish,
    gpu_prove_start,
    prove,
)
from engine.prover.keys import ProvingKey, VerifyingKey
from engine.prover.setup import DEV_SETUP_NOTICE, setup
from engine.prover.snarkjs import (
    FormatError,
    read_r1cs,
    read_wtns,
    read_zkey,
    write_wtns,
    write_zkey,
)
from engine.prover.verify import InvalidProof, verify


def select_device(preferred: str | None = None) -> str:
    """"cuda:0" when a GPU is usable, else "cpu"; an explicit choice (argument, then the
    PROVINGSITE_DEVICE environment variable) wins. "auto" means: choose."""
    choice = preferred or os.environ.get("PROVINGSITE_DEVICE") or "auto"
    if choice != "auto":
        if choice != "cpu" and not (choice.startswith("cuda:") and choice[5:].isdigit()):
            raise ValueError(f"unknown device {choice!r}; expected 'cpu', 'cuda:N' or 'auto'")
        return choice
    try:
        from engine.prover import gpu

        return "cuda:0" if gpu.gpu_available() else "cpu"
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
    "gpu_prove_start",
    "prove",
    "read_r1cs",
    "read_wtns",
    "read_zkey",
    "select_device",
    "setup",
    "verify",
    "write_wtns",
    "write_zkey",
]
