"""Jobs by circuit id: a registered circuit proved from input signals or from a ready witness.

From inputs, the request only checks them against the circuit's metadata (input_metadata:
every signal known and of its length, every value in the field, none missing; a signal at
fault is named) and the job is accepted at once: the client's .wasm runs in the engine's
synthesis stage, under the partition's memory reservation and an instruction and time budget,
never in the web process. A failing assertion in the circuit fails the job with the
generator's own message.
From a .wtns, the witness is checked here against every constraint when the circuit was
registered with its .r1cs: a witness that does not satisfy the circuit is a 400.
The job stores a digest of the inputs or of the witness file, not the signals (they are often
the prover's secrets), so the same request again is recognised as the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from engine.api.errors import ApiError
from engine.api.job_fields import conflict_error
from engine.api.schemas import CircuitJobIn
from engine.api.uploads import CURVES, NAMES_FILE, discard
from engine.circuits import job_folder
from engine.ledger import submission
from engine.ledger.submission import JobConflict, Submission
from engine.models import Circuit, ProofJob
from engine.prover.formats.atomic import replaced
from engine.prover.formats.errors import FormatError
from engine.prover.formats.r1cs import CircuitShape
from engine.prover.formats.wasm_probe import probe_apart
from engine.prover.formats.wasm_witness import WitnessError, check_inputs
from engine.prover.satisfied import check_file_satisfied
from engine.states import ProofKind

# Beside a registered circuit's files: its input signals, probed once from its .wasm.
SIGNALS_FILE = "input_signals.json"


def visible_circuits(client: Any) -> Any:
    """The circuits a token may use: a client's own, every circuit for an operator token."""
    from engine.models import ApiToken

    if isinstance(client, ApiToken) and not client.sees_every_job:
        return Circuit.objects.filter(owner=client)
    return Circuit.objects.all()


def circuit_of(client: Any, circuit_id: str) -> Circuit:
    """The circuit, 404 when the token may not see it."""
    circuit = None
    # Only a SHA-256 can name a circuit; anything else (a NUL, which PostgreSQL refuses in a
    # query, among others) is not found without asking the database.
    if re.fullmatch(r"[0-9a-f]{64}", circuit_id):
        circuit = visible_circuits(client).filter(pk=circuit_id).first()
    if circuit is None:
        raise ApiError(404, "not_found", "circuit", f"no registered circuit with id {circuit_id!r}")
    return circuit


def input_metadata(circuit: Circuit) -> dict[str, Any]:
    """The circuit's input signals (wasm_witness.input_signals), probed from its .wasm once, at
    registration or at the first job after a file joined it, and kept beside its files."""
    folder = Path(circuit.zkey_path).parent
    try:
        return dict(json.loads((folder / SIGNALS_FILE).read_text()))
    except (OSError, ValueError):
        pass
    names_file = folder / NAMES_FILE
    names = json.loads(names_file.read_text()) if names_file.exists() else []
    try:  # in a child process with a time and memory limit: no client code compiles in the web process
        probed = probe_apart(Path(circuit.wasm_path), names)
        meta = {"count": probed["count"], "signals": probed["signals"]}
    except WitnessError as exc:
        raise ApiError(409, "mismatch", "circuit", f"the circuit's .wasm cannot be read: {exc.message}; "
                                                   "register it again") from None
    with replaced(folder / SIGNALS_FILE) as tmp:
        tmp.write_text(json.dumps(meta))
    return meta


def _link(source: str, target: Path) -> None:
    # A hard link: the job keeps its files even if the circuit is deleted once the job is done.
    try:
        os.link(source, target)
    except OSError:
        os.symlink(source, target)


def check_witness(circuit: Circuit, wtns: Path, field: str) -> None:
    """ApiError naming ``field`` when the circuit has an r1cs and the witness fails one of its
    constraints; a registered r1cs found malformed is the circuit's fault, not the caller's."""
    if not circuit.r1cs_path:
        return
    try:
        check_file_satisfied(Path(circuit.r1cs_path), wtns, CircuitShape(circuit.curve, circuit.n_vars, circuit.n_public))
    except FormatError as exc:
        if exc.field == "r1cs":
            raise ApiError(409, "mismatch", "circuit", f"the circuit's registered r1cs {exc.message}; "
                                                       "register it again") from None
        raise ApiError(400, "invalid", field, exc.message) from None


def submit_staged(circuit: Circuit, job_id: str, level: int | None, staging: Path, wtns_sha256: str,
                  client: Any, deadline: datetime | None = None, callback_url: str = "") -> tuple[ProofJob, bool]:
    """A job of ``circuit`` proving the witness.wtns in ``staging`` (moved into place if created).
    With the circuit's .r1cs, the witness is checked against every constraint first."""
    check_witness(circuit, staging / job_folder.WTNS, "wtns")
    return _submit_folder(circuit, job_id, level, staging, {"circuit": circuit.pk, "wtns_sha256": wtns_sha256}, client,
                          deadline, callback_url)


def _submit_folder(circuit: Circuit, job_id: str, level: int | None, staging: Path, inputs: dict[str, Any],
                   client: Any, deadline: datetime | None, callback_url: str) -> tuple[ProofJob, bool]:
    _link(circuit.zkey_path, staging / job_folder.ZKEY)
    sub = Submission(kind=ProofKind.CUSTOM, job_id=job_id, inputs=inputs, num_partitions=1,
                     circuit_id=circuit.job_circuit_id, priority=level, curve=circuit.curve, deadline=deadline,
                     callback_url=callback_url)
    try:
        return submission.submit(sub, client, staged=staging, circuit=circuit)
    except JobConflict as exc:
        raise conflict_error(exc, client) from None


def submit_circuit_job(payload: CircuitJobIn, client: Any = None) -> tuple[ProofJob, bool]:
    """Check the inputs against the circuit's metadata and submit; ApiError (4xx) for anything
    refused. Nothing of the client's .wasm runs here (see the module doc)."""
    job_id = submission.job_id_of(payload.job_id)
    level = submission.priority_of(payload.priority)
    submission.check_priority(client, level)
    circuit = circuit_of(client, payload.circuit)
    if not circuit.wasm_path:
        raise ApiError(409, "no_wasm", "circuit", (
            f"this circuit was registered without its .wasm, so its witness cannot be computed here: send a "
            f"ready witness to POST /api/v1/circuits/{circuit.pk}/jobs (job_id and a .wtns), or a zkey and a .wtns "
            "to POST /api/v1/jobs/custom; or POST /api/v1/circuits again with the zkey and its .wasm to prove "
            "from inputs"))
    try:
        inputs = check_inputs(payload.inputs, input_metadata(circuit), CURVES[circuit.curve][1])
    except WitnessError as exc:
        raise ApiError(400, "invalid", f"inputs.{exc.signal}" if exc.signal else "inputs", exc.message) from None
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    staging = Path(settings.DATA_DIR) / "uploads" / f".incoming-{secrets.token_hex(8)}"
    try:
        staging.mkdir(parents=True)
        (staging / job_folder.INPUTS).write_text(canonical)
        _link(circuit.wasm_path, staging / job_folder.WASM)
        record = {"circuit": circuit.pk, "inputs_sha256": hashlib.sha256(canonical.encode()).hexdigest()}
        return _submit_folder(circuit, job_id, level, staging, record, client, payload.deadline,
                              submission.callback_url_of(payload.callback_url))
    finally:
        discard(staging)


__all__ = ["circuit_of", "input_metadata", "submit_circuit_job", "submit_staged", "visible_circuits"]
