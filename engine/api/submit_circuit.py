"""Jobs by circuit id: the witness computed here from the registered .wasm, then a custom job.

The inputs are refused before any proving when the circuit refuses them (an unknown or
missing signal, a value outside the field, a failing assertion), with the signal named.
When the circuit was registered with its .r1cs, every witness (computed here or uploaded)
is checked against every constraint before the job exists: a witness that does not satisfy
the circuit is a 400, never a job that fails at verification.
The job stores the witness file's digest, not the signals (they are often the prover's
secrets), so the same inputs again are recognised as the same request.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings

from engine.api.circuit_files import NAMES_FILE
from engine.api.errors import ApiError
from engine.api.job_fields import _conflict
from engine.api.satisfaction import CircuitShape, check_satisfied
from engine.api.schemas import CircuitJobIn
from engine.api.uploads import STORED_NAMES, BadCircuitFile, discard
from engine.ledger import submission
from engine.ledger.submission import JobConflict, Submission
from engine.models import Circuit, ProofJob
from engine.prover.wasm_witness import WitnessError, calculate_witness, witness_array
from engine.states import ProofKind


def visible_circuits(client: Any) -> Any:
    """The circuits a token may use: a client's own, every circuit for an operator token."""
    from engine.models import ApiToken

    if isinstance(client, ApiToken) and not client.sees_every_job:
        return Circuit.objects.filter(owner=client)
    return Circuit.objects.all()


def circuit_of(client: Any, circuit_id: str, lock: bool = False) -> Circuit:
    """The circuit, 404 when the token may not see it; ``lock`` holds its row to the transaction's end."""
    circuit = None
    # Only a SHA-256 can name a circuit; anything else (a NUL, which PostgreSQL refuses in a
    # query, among others) is not found without asking the database.
    if re.fullmatch(r"[0-9a-f]{64}", circuit_id):
        rows = visible_circuits(client).filter(pk=circuit_id)
        circuit = (rows.select_for_update() if lock else rows).first()
    if circuit is None:
        raise ApiError(404, "not_found", "circuit", f"no registered circuit with id {circuit_id!r}")
    return circuit


def witness_for(circuit: Circuit, inputs: dict[str, Any]) -> list[int]:
    if not circuit.wasm_path:
        raise ApiError(409, "no_wasm", "circuit", "this circuit was registered without its .wasm; "
                                                  "register it again with the wasm to prove from inputs")
    names_file = Path(circuit.zkey_path).with_name(NAMES_FILE)
    names = json.loads(names_file.read_text()) if names_file.exists() else []
    try:
        witness = calculate_witness(Path(circuit.wasm_path).read_bytes(), inputs, names)
    except WitnessError as exc:
        field = f"inputs.{exc.signal}" if exc.signal else "inputs"
        raise ApiError(400, "invalid", field, exc.message) from None
    if len(witness) != circuit.n_vars:
        raise ApiError(409, "mismatch", "circuit", f"the .wasm computes {len(witness)} signals; "
                                                   f"the zkey has {circuit.n_vars}")
    return witness


def _link_key(circuit: Circuit, target: Path) -> None:
    # A hard link: the job keeps its key even if the circuit is deleted once the job is done.
    try:
        os.link(circuit.zkey_path, target)
    except OSError:
        os.symlink(circuit.zkey_path, target)


def _write_witness(circuit: Circuit, witness: list[int], staging: Path) -> str:
    from engine.prover.snarkjs import write_wtns

    staging.mkdir(parents=True)
    wtns = staging / STORED_NAMES["wtns"]
    write_wtns(wtns, circuit.curve, witness_array(witness))
    return hashlib.sha256(wtns.read_bytes()).hexdigest()


def check_witness(circuit: Circuit, wtns: Path, field: str) -> None:
    """ApiError naming ``field`` when the circuit has an r1cs and the witness fails one of its
    constraints; a registered r1cs found malformed is the circuit's fault, not the caller's."""
    if not circuit.r1cs_path:
        return
    try:
        check_satisfied(Path(circuit.r1cs_path), wtns, CircuitShape(circuit.curve, circuit.n_vars, circuit.n_public),
                        witness_field=field)
    except BadCircuitFile as exc:
        if exc.field == "r1cs":
            raise ApiError(409, "mismatch", "circuit", f"the circuit's registered r1cs {exc.message}; "
                                                       "register it again") from None
        raise ApiError(400, "invalid", field, exc.message) from None


def submit_staged(circuit: Circuit, job_id: str, level: int | None, staging: Path, wtns_sha256: str,
                  client: Any, witness_field: str = "wtns") -> tuple[ProofJob, bool]:
    """A job of ``circuit`` proving the witness.wtns in ``staging`` (moved into place if created).

    The job's inputs are the circuit and the witness file's digest: the same witness sent as
    inputs or as a .wtns is the same request. ``witness_field`` is what a refusal of the
    witness names: the uploaded ``wtns``, or the ``inputs`` it was computed from."""
    check_witness(circuit, staging / STORED_NAMES["wtns"], witness_field)
    _link_key(circuit, staging / STORED_NAMES["zkey"])
    sub = Submission(kind=ProofKind.CUSTOM, job_id=job_id, inputs={"circuit": circuit.pk, "wtns_sha256": wtns_sha256},
                     num_partitions=1, circuit_id=circuit.job_circuit_id, priority=level, curve=circuit.curve)
    try:
        # the circuit's row held against a concurrent DELETE, which refuses while an active job uses it
        return submission.submit(sub, client, staged=staging,
                                 also_locked=lambda: circuit_of(client, circuit.pk, lock=True))
    except JobConflict as exc:
        raise _conflict(exc, client) from None


def submit_circuit_job(payload: CircuitJobIn, client: Any = None) -> tuple[ProofJob, bool]:
    """Validate, compute the witness and submit; ApiError (4xx) for anything refused."""
    job_id = submission.job_id_of(payload.job_id)
    level = submission.priority_of(payload.priority)
    submission.check_priority(client, level)  # before the client's .wasm runs
    circuit = circuit_of(client, payload.circuit)
    witness = witness_for(circuit, payload.inputs)
    staging = Path(settings.DATA_DIR) / "uploads" / f".incoming-{secrets.token_hex(8)}"
    try:
        digest = _write_witness(circuit, witness, staging)
        return submit_staged(circuit, job_id, level, staging, digest, client, witness_field="inputs")
    finally:
        discard(staging)


__all__ = ["circuit_of", "submit_circuit_job", "submit_staged", "visible_circuits", "witness_array"]
