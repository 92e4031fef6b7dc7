"""The prover's shared types: the proof, the keys, and the errors its modules raise.

The modules that produce and consume these (groth16, verify, the snarkjs file formats, the
command line) import them from here rather than from each other, so none of them imports
another for a type and the prover has no import cycles. Only leaf modules are imported here
(curves, and keys when one of its names is asked for: the command-line prover imports this
module for the proof and the errors, and keeps dataclasses and the keys out of its start-up);
the names stay importable from their old homes as well.

Named datatypes, not types: a module named types in this directory shadows the standard
library's `types` for any script run from here (sys.path[0] is the script's directory),
which breaks the interpreter's own imports (enum, re, dataclasses).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, NamedTuple

from engine.prover.params.curves import G1Affine, G2Affine

if TYPE_CHECKING:
    from engine.prover.formats.errors import FormatError
    from engine.prover.keys import ProvingKey, VerifyingKey

__all__ = [
    "FormatError",
    "InvalidProof",
    "Proof",
    "ProofAborted",
    "ProvingKey",
    "UnsatisfiedConstraint",
    "VerifyingKey",
]


class Proof(NamedTuple):
    """A Groth16 proof as affine Python ints (None = infinity); snarkjs_json writes proof.json."""

    curve: str
    pi_a: G1Affine | None
    pi_b: G2Affine | None
    pi_c: G1Affine | None


class UnsatisfiedConstraint(ValueError):
    """The witness does not satisfy the constraint system (nothing was proved)."""

    def __init__(self, index: int, detail: str = "") -> None:
        self.index = index
        super().__init__(f"constraint {index} not satisfied{': ' + detail if detail else ''}")


class ProofAborted(RuntimeError):
    """The caller asked to stop (its job was cancelled, its claim fenced): no proof was made."""


class InvalidProof(ValueError):
    """The proof, key or public inputs are malformed (the reason is the message)."""


# Names kept importable from here, loaded on first use. FormatError lives with the file formats
# (engine.prover.formats), whose readers import this module: a plain import back would be a cycle.
_LAZY = {"ProvingKey": "engine.prover.keys", "VerifyingKey": "engine.prover.keys",
         "FormatError": "engine.prover.formats.errors"}


def __getattr__(name: str) -> Any:
    home = _LAZY.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
