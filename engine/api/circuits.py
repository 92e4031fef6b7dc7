"""The circuits endpoints: register a circom circuit once, list, read, delete, export its verifier.

A registration streams the zkey (and optionally the circuit's .wasm and .r1cs) to disk with a
running byte count, checks each file's headers against its real size, and stores the files
content-addressed under DATA_DIR/circuits/<sha256 of the zkey>/: the same key registered
again is the same circuit.
"""

from __future__ import annotations

import json
import secrets
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.urls import reverse
from ninja import Router, Schema, Status
from pydantic import Field

from engine.api.auth import client_of
from engine.api.errors import ApiError
from engine.api.schemas import (
    CALLBACK_DOC,
    CURVE_DOC,
    CURVE_NAME_DOC,
    DEADLINE_DOC,
    JOB_ID_MAX,
    JOB_ID_PATTERN,
    ErrorOut,
    JobOut,
)
from engine.api.submit_circuit import SIGNALS_FILE, circuit_of, submit_staged, visible_circuits
from engine.api.uploads import (
    NAMES_FILE,
    SYM_NAME,
    StagedFile,
    StreamingLimitHandler,
    UploadTooLarge,
    checked_upload,
    discard,
)
from engine.format import curve_name
from engine.ledger import circuits, submission
from engine.ledger.circuits import circuits_dir
from engine.models import Circuit
from engine.prover.formats.atomic import replaced
from engine.prover.formats.circom import check_sym, check_wasm
from engine.prover.formats.errors import FormatError
from engine.prover.formats.headers import ZkeyHeader
from engine.prover.formats.r1cs import check_r1cs
from engine.prover.formats.zkey import check_zkey

router = Router(tags=["circuits"])

ERRORS: dict[int | tuple[int, ...], Any] = {(400, 401, 404, 409, 413): ErrorOut}
# The names a circuit's files are stored under, in its content-addressed folder.
FILES = {"zkey": "circuit.zkey", "wasm": "circuit.wasm", "r1cs": "circuit.r1cs", "sym": SYM_NAME}
MODEL_FILES = ("zkey", "wasm", "r1cs")  # the files with a path and size on the Circuit row
VK_NAME = "verification_key.json"


class CircuitOut(Schema):
    id: str
    name: str
    curve: str = Field(description=CURVE_DOC)
    curve_name: str = Field(description=CURVE_NAME_DOC)
    n_public: int
    n_vars: int
    domain_size: int
    zkey_bytes: int
    wasm_bytes: int | None
    r1cs_bytes: int | None
    sym: bool = Field(description="Whether the circuit's .sym was registered (it names missing input signals)")
    input_count: int | None = Field(description="How many input values the circuit takes (null without its .wasm)")
    inputs: dict[str, int] | None = Field(description=(
        "Each input signal's length by name, as a job's `inputs` must give them (null without its .wasm and .sym)"))
    created_at: datetime
    links: dict[str, str]


def _out(circuit: Circuit) -> dict[str, Any]:
    def url(view: str) -> str:
        return reverse(f"api-v1:{view}", kwargs={"circuit_id": circuit.pk})

    links = {"self": url("get_circuit"), "verification_key": url("get_verification_key")}
    if circuit.curve == "bn128":
        links["verifier"] = url("get_verifier")
    signals = _input_signals(circuit)
    return {"id": circuit.pk, "name": circuit.name, "curve": circuit.curve, "curve_name": curve_name(circuit.curve),
            "n_public": circuit.n_public,
            "n_vars": circuit.n_vars, "domain_size": circuit.domain_size, "zkey_bytes": circuit.zkey_bytes,
            "wasm_bytes": circuit.wasm_bytes, "r1cs_bytes": circuit.r1cs_bytes,
            "sym": Path(circuit.zkey_path).with_name(NAMES_FILE).exists(),
            "input_count": signals.get("count"), "inputs": signals.get("signals"),
            "created_at": circuit.created_at, "links": links}


def _input_signals(circuit: Circuit) -> dict[str, Any]:
    """What the registration read from the circuit's .wasm (and .sym), kept beside its files."""
    if not circuit.wasm_path:
        return {}
    try:
        return dict(json.loads(Path(circuit.zkey_path).with_name(SIGNALS_FILE).read_text()))
    except (OSError, ValueError):  # a .wasm joined later: probed at its first job
        return {}


def _checked(files: Any) -> tuple[dict[str, StagedFile], ZkeyHeader]:
    zkey = files.get("zkey")
    if not isinstance(zkey, StagedFile) or zkey.size == 0:
        raise ApiError(400, "invalid", "zkey", "a non-empty snarkjs Groth16 .zkey file is required")
    staged = {name: item for name in FILES if isinstance(item := files.get(name), StagedFile)}
    try:
        header = check_zkey(zkey.path)
        if "r1cs" in staged:
            check_r1cs(staged["r1cs"].path, header)
        names: list[str] = []
        if "sym" in staged:
            names = check_sym(staged["sym"].path)
            staged["sym"].path.with_name(NAMES_FILE).write_text(json.dumps(names))
        if "wasm" in staged:  # its field, and what a job's inputs are checked against, probed once here
            meta = check_wasm(staged["wasm"].path, header, names)
            staged["zkey"].path.with_name(SIGNALS_FILE).write_text(json.dumps(meta))
    except FormatError as exc:
        raise ApiError(400, "invalid", exc.field, exc.message) from None
    return staged, header


def _existing(circuit: Circuit, client: Any, staged: dict[str, StagedFile], header: ZkeyHeader) -> Status:
    """The circuit already registered; files it lacks (a .wasm added later, say) join it, and
    its input signals are read again from what it now has, so the record names them at once."""
    if not visible_circuits(client).filter(pk=circuit.pk).exists():
        raise ApiError(409, "conflict", "zkey", "this zkey is already registered by another client")
    folder = Path(circuit.zkey_path).parent
    changed: dict[str, Any] = {}
    for name in ("wasm", "r1cs"):
        if name in staged and not getattr(circuit, f"{name}_path"):
            staged[name].path.replace(folder / FILES[name])
            changed |= {f"{name}_path": str(folder / FILES[name]), f"{name}_bytes": staged[name].size}
    sym_joined = "sym" in staged and not (folder / NAMES_FILE).exists()
    if sym_joined:
        staged["sym"].path.replace(folder / SYM_NAME)
        staged["sym"].path.with_name(NAMES_FILE).replace(folder / NAMES_FILE)
    if changed or sym_joined:
        _signals_again(folder, staged, header, has_wasm=bool(circuit.wasm_path or "wasm_path" in changed),
                       wasm_joined="wasm_path" in changed)
    circuits.add_files(circuit, changed)
    return Status(200, _out(circuit))


def _signals_again(folder: Path, staged: dict[str, StagedFile], header: ZkeyHeader, *, has_wasm: bool,
                   wasm_joined: bool) -> None:
    """A registered circuit's input signals after a .wasm or .sym joined it: the registration's
    own probe of the .wasm that joined where it saw the names too (or there are none), else the
    circuit's .wasm probed again with the names it now has."""
    target = folder / SIGNALS_FILE
    if not has_wasm:
        target.unlink(missing_ok=True)
        return
    names_file = folder / NAMES_FILE
    names = json.loads(names_file.read_text()) if names_file.exists() else []
    if wasm_joined and ("sym" in staged or not names):
        staged["zkey"].path.with_name(SIGNALS_FILE).replace(target)
        return
    try:
        meta = check_wasm(folder / FILES["wasm"], header, names)
    except FormatError as exc:
        raise ApiError(400, "invalid", exc.field, exc.message) from None
    target.write_text(json.dumps(meta))


def _register(request: HttpRequest, staging: Path) -> Status:
    staged, header = _checked(request.FILES)  # reads the body through StreamingLimitHandler
    zkey = staged["zkey"]
    client = client_of(request)
    found = Circuit.objects.filter(pk=zkey.sha256).first()
    if found is not None:
        return _existing(found, client, staged, header)
    target = circuits_dir() / zkey.sha256
    fields: dict[str, Any] = {f"{name}_path": str(target / FILES[name]) for name in staged if name in MODEL_FILES}
    fields.update({f"{name}_bytes": item.size for name, item in staged.items() if name in MODEL_FILES})

    def adopt_files() -> None:
        # The row is ours now; a folder already there was left by a registration that failed.
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)

    name = (request.POST.get("name") or "").strip() or zkey.name or ""
    circuit = circuits.register(dict(id=zkey.sha256, name=name[:200], curve=header.curve,
                                     n_public=header.n_public, n_vars=header.n_vars,
                                     domain_size=header.domain_size, owner=client, **fields), adopt_files)
    if circuit is None:  # the same key registered at the same moment: one row won
        return _existing(Circuit.objects.get(pk=zkey.sha256), client, staged, header)
    return Status(201, _out(circuit))


_REGISTER_BODY = {
    "requestBody": {
        "required": True,
        "content": {"multipart/form-data": {"schema": {
            "type": "object", "required": ["zkey"],
            "properties": {
                "zkey": {"type": "string", "format": "binary", "description": "snarkjs Groth16 .zkey"},
                "wasm": {"type": "string", "format": "binary", "description": "circom's witness generator .wasm"},
                "r1cs": {"type": "string", "format": "binary", "description": "circom's .r1cs"},
                "sym": {"type": "string", "format": "binary",
                        "description": "circom's .sym (circom --sym): lets a missing input signal be named"},
                "name": {"type": "string", "maxLength": 200,
                         "description": "a name for the circuit (default: the zkey's file name)"},
            },
        }}},
    }
}


@router.post("/circuits", response={200: CircuitOut, 201: CircuitOut, **ERRORS, 507: ErrorOut},
             openapi_extra=_REGISTER_BODY,
             summary="Register a circom circuit (zkey, optionally its .wasm, .r1cs and .sym)")
def register_circuit(request: HttpRequest) -> Status:
    """201 with the new circuit; 200 with the existing one when the same zkey is registered again."""
    limit = checked_upload(request, "a zkey (and optionally wasm, r1cs)")
    staging = circuits_dir() / f".incoming-{secrets.token_hex(8)}"
    request.upload_handlers = [StreamingLimitHandler(staging, limit, request, names=FILES)]
    try:
        return _register(request, staging)
    except UploadTooLarge as exc:
        raise ApiError(413, "too_large", "body", str(exc)) from None
    except MultiPartParserError as exc:
        raise ApiError(400, "invalid", "body", f"not a readable multipart body ({exc})") from None
    finally:
        discard(staging)  # moved into place when accepted; anything left is not wanted


@router.get("/circuits", response={200: list[CircuitOut], **ERRORS}, summary="The circuits this token may use")
def list_circuits(request: HttpRequest) -> list[dict[str, Any]]:
    return [_out(c) for c in visible_circuits(client_of(request))]


@router.get("/circuits/{circuit_id}", response={200: CircuitOut, **ERRORS}, summary="One registered circuit")
def get_circuit(request: HttpRequest, circuit_id: str) -> dict[str, Any]:
    return _out(circuit_of(client_of(request), circuit_id))


@router.delete("/circuits/{circuit_id}", response={204: None, **ERRORS}, summary="Delete a circuit no job is using")
def delete_circuit(request: HttpRequest, circuit_id: str) -> Status:
    circuit = circuit_of(client_of(request), circuit_id)
    try:
        deleted = circuits.delete_unused(circuit.pk, visible_circuits(client_of(request)))
    except circuits.CircuitInUse as exc:
        raise ApiError(409, "in_use", "circuit", str(exc)) from None
    if not deleted:  # deleted by another request since it was read
        circuit_of(client_of(request), circuit_id)  # its 404
    return Status(204, None)


def verification_key(circuit: Circuit) -> dict[str, Any]:
    """snarkjs's verification_key.json for the circuit, computed once and kept beside the key."""
    from engine.prover.snarkjs import read_zkey, vk_to_json

    cached = Path(circuit.zkey_path).with_name(VK_NAME)
    if cached.exists():
        return json.loads(cached.read_text())
    vk = vk_to_json(read_zkey(circuit.zkey_path).vk)
    with replaced(cached) as tmp:  # atomic: a concurrent reader sees the whole file or none
        tmp.write_text(json.dumps(vk, indent=1))
    return vk


@router.get(f"/circuits/{{circuit_id}}/{VK_NAME}", response={200: dict[str, Any], **ERRORS},
            summary="verification_key.json, as `snarkjs zkey export verificationkey` writes it")
def get_verification_key(request: HttpRequest, circuit_id: str) -> dict[str, Any]:
    return verification_key(circuit_of(client_of(request), circuit_id))


@router.get("/circuits/{circuit_id}/verifier.sol", response={200: str, **ERRORS},
            summary="A Solidity verifier for the circuit (BN254)")
def get_verifier(request: HttpRequest, circuit_id: str) -> HttpResponse:
    from engine.solidity_verifier import verifier_sol

    circuit = circuit_of(client_of(request), circuit_id)
    if circuit.curve != "bn128":
        raise ApiError(409, "unsupported", "circuit", "Solidity verifiers exist for BN254 circuits only")
    return HttpResponse(verifier_sol(verification_key(circuit)), content_type="text/plain; charset=utf-8")


_WTNS_BODY = {
    "requestBody": {
        "required": True,
        "content": {"multipart/form-data": {"schema": {
            "type": "object", "required": ["job_id", "wtns"],
            "properties": {
                "job_id": {"type": "string", "pattern": JOB_ID_PATTERN, "maxLength": JOB_ID_MAX},
                "priority": {"type": "string", "description": "critical, high, normal, low or 0..3"},
                "deadline": {"type": "string", "format": "date-time", "description": DEADLINE_DOC},
                "callback_url": {"type": "string", "maxLength": 2000, "description": CALLBACK_DOC},
                "wtns": {"type": "string", "format": "binary", "description": "snarkjs .wtns witness"},
            },
        }}},
    }
}


@router.post("/circuits/{circuit_id}/jobs", response={200: JobOut, 201: JobOut, **ERRORS, 507: ErrorOut},
             openapi_extra=_WTNS_BODY,
             summary="Prove a registered circuit from a ready witness (.wtns) instead of inputs")
def create_wtns_job(request: HttpRequest, circuit_id: str) -> Status:
    """Like POST /jobs with a circuit and inputs, for a client that computes its witness itself."""
    from engine.api.job_fields import own_job
    from engine.api.job_out import job_detail

    circuit = circuit_of(client_of(request), circuit_id)
    limit = checked_upload(request, "job_id and wtns")
    staging = Path(settings.DATA_DIR) / "uploads" / f".incoming-{secrets.token_hex(8)}"
    request.upload_handlers = [StreamingLimitHandler(staging, limit, request)]
    try:
        wtns = request.FILES.get("wtns")
        job_id = submission.job_id_of(request.POST.get("job_id"))
        level = submission.priority_of(request.POST.get("priority"))
        submission.check_priority(client_of(request), level)
        deadline = submission.deadline_of(request.POST.get("deadline"))
        callback_url = submission.callback_url_of(request.POST.get("callback_url"))
        if "zkey" in request.FILES:
            raise ApiError(400, "invalid", "zkey", "the circuit's zkey is registered already; send only the wtns")
        if not isinstance(wtns, StagedFile) or wtns.size == 0:
            raise ApiError(400, "invalid", "wtns", "a non-empty .wtns file is required")
        _check_witness(wtns.path, circuit)
        job, created = own_job(*submit_staged(circuit, job_id, level, staging, wtns.sha256, client_of(request),
                                            deadline, callback_url),
                             client_of(request))
    except UploadTooLarge as exc:
        raise ApiError(413, "too_large", "body", str(exc)) from None
    except MultiPartParserError as exc:
        raise ApiError(400, "invalid", "body", f"not a readable multipart body ({exc})") from None
    finally:
        discard(staging)
    return Status(201 if created else 200, job_detail(job))


def _check_witness(path: Path, circuit: Circuit) -> None:
    from engine.prover.snarkjs import FormatError, read_wtns_with_curve

    try:
        curve, witness = read_wtns_with_curve(path)
    except FormatError as exc:
        raise ApiError(400, "invalid", "wtns", str(exc).split(": ", 1)[-1]) from None
    if curve != circuit.curve:
        raise ApiError(400, "invalid", "wtns", f"is a witness over {curve}; the circuit is over {circuit.curve}")
    if witness.shape[0] != circuit.n_vars:
        raise ApiError(400, "invalid", "wtns", f"holds {witness.shape[0]} values; the circuit has {circuit.n_vars} signals")
