"""A custom circuit as uploaded: a snarkjs Groth16 .zkey, its .wtns, and optionally the
circuit's .r1cs, validated in full and against each other before a job exists.

Everything the engine will later read is checked, against the files' real sizes, so a
malformed upload is a FormatError naming the file and the reason rather than a job that
fails (or exhausts the host) later:

* the section table: every declared size against the bytes actually left, no duplicates;
* the zkey header: n8q / n8r, the base prime (which names the curve), the scalar prime,
  nVars ≥ nPublic + 1, a power-of-two domain no larger than the field allows, and every
  section exactly as large as those fields say (so a small file cannot declare a big key);
* the coefficients: matrix A or B, constraint below the domain, signal below nVars, value
  reduced; the public-input rows snarkjs appends to A are present; the domain is the one
  snarkjs derives from the constraint count;
* every point coordinate reduced below q;
* the witness: its field is the zkey's scalar field, it holds exactly nVars reduced values,
  and witness[0] = 1;
* with the .r1cs: that it is the zkey's circuit (field, wires, public signals and constraint
  count) and that the witness satisfies every constraint, A·w ∘ B·w = C·w.

What a zkey alone cannot tell is whether the witness satisfies the circuit: without an r1cs,
such a witness is caught when its proof fails verification, and that failure is recorded as
not retryable (engine/finalize.py). Files are read in bounded blocks: the caller never holds
more than about a MiB of an upload, whatever it declares.
"""

from __future__ import annotations

from pathlib import Path

from engine.prover.formats.headers import ZkeyHeader
from engine.prover.formats.r1cs import CircuitShape
from engine.prover.formats.wtns import validate_wtns
from engine.prover.formats.zkey import validate_zkey
from engine.prover.satisfied import check_file_satisfied


def validate_custom(zkey: Path, wtns: Path, r1cs: Path | None = None) -> ZkeyHeader:
    """The upload's zkey header (its curve, signals and domain), or FormatError naming the
    file at fault and why.

    With ``r1cs``, also the witness checked against every constraint of it."""
    zkey_bytes, wtns_bytes = zkey.stat().st_size, wtns.stat().st_size
    with open(zkey, "rb") as fh:
        key = validate_zkey(fh, zkey_bytes)
    header = key.header
    with open(wtns, "rb") as fh:
        validate_wtns(fh, wtns_bytes, header)
    if r1cs is not None:
        check_file_satisfied(r1cs, wtns, CircuitShape(header.curve, header.n_vars, header.n_public, key.n_constraints))
    return header
