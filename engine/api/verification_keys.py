"""Verifying keys for download, in snarkjs's verification_key.json format, for every kind.

* ``GET /kinds/{kind}/verification_key.json``: a built-in kind's key at this service's scale,
  for a client that wants it before its first job.
* ``GET /jobs/{job_id}/verification_key.json``: the key that verifies that job's proofs, whatever
  its kind: a built-in kind's (at the job's own scale), a registered circuit's or an uploaded
  zkey's. A registered circuit's key is also at ``/circuits/{id}/verification_key.json``.

With the proof from ``/jobs/{job_id}/proof/snarkjs`` it is what ``snarkjs groth16 verify`` takes.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Annotated, Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Path as PathParam
from ninja import Router

from engine.api.errors import ApiError
from engine.api.jobs import ERRORS, JobIdPath, visible_job
from engine.api.schemas import BuiltinKind, VerificationKeyOut
from engine.circuits import kinds
from engine.circuits.keystore import MANIFEST, KeyStore, regenerate_hint, sha256_file
from engine.models import ProofJob

router = Router(tags=["verification keys"])

VK_NAME = "verification_key.json"
ZKEY_NAME = "circuit.zkey"  # what an uploaded or registered circuit's job keeps in its upload_dir
KindPath = Annotated[BuiltinKind, PathParam(..., example="winning-post")]
VK_DOC = ("snarkjs's verification_key.json (protocol, curve, nPublic, vk_alpha_1, vk_beta_2, vk_gamma_2, "
          "vk_delta_2, vk_alphabeta_12, IC), as `snarkjs zkey export verificationkey` writes it")


def builtin_key(circuit_id: str) -> dict[str, Any]:
    """The key the local setup wrote for a built-in circuit, checked against its manifest entry.

    The file is served as written (it is snarkjs's format already); its checksum is checked so
    a damaged file is refused rather than handed to a verifier. A key not made yet is a 409
    naming the command that makes it: a web request never runs a trusted setup."""
    keys = KeyStore(Path(settings.PROVINGSITE["PARAMS_DIR"]))
    path = keys.verifying_key_path(circuit_id)
    entry = keys.read_manifest().get(circuit_id, {}).get("verification_key")
    if not path.exists() or entry is None:
        raise ApiError(409, "keys_missing", "kind",
                       f"the keys of {circuit_id} are not made yet: run "
                       f"`{regenerate_hint(circuit_id).removesuffix(' --force')}` (an engine makes development keys "
                       "itself only with PROVINGSITE_DEV_KEYS=1)")
    if sha256_file(path) != entry.get("sha256"):
        raise ApiError(409, "keys_corrupt", "kind",
                       f"{path.name} does not match its checksum in {MANIFEST}; "
                       f"regenerate it with `{regenerate_hint(circuit_id)}`")
    return json.loads(path.read_text())


def zkey_key(folder: Path) -> dict[str, Any]:
    """The key of the zkey in ``folder``, computed once and kept beside it (the pairing in
    vk_alphabeta_12 takes a while in Python; the key never changes)."""
    from engine.prover.snarkjs import read_zkey, vk_to_json

    cached = folder / VK_NAME
    if cached.exists():
        return json.loads(cached.read_text())
    vk = vk_to_json(read_zkey(folder / ZKEY_NAME).vk)
    tmp = folder / f".{VK_NAME}.{secrets.token_hex(4)}"
    tmp.write_text(json.dumps(vk, indent=1))
    tmp.replace(cached)  # atomic: a concurrent reader sees the whole file or none
    return vk


def job_key(job: ProofJob) -> dict[str, Any]:
    if job.upload_dir:  # an uploaded zkey, or a registered circuit's (hard-linked in at submission)
        if not (Path(job.upload_dir) / ZKEY_NAME).exists():
            raise ApiError(409, "keys_missing", "job_id", f"job {job.job_id!r} no longer holds its circuit's key")
        return zkey_key(Path(job.upload_dir))
    return builtin_key(job.circuit_id)


@router.get(f"/kinds/{{kind}}/{VK_NAME}", response={200: VerificationKeyOut, **ERRORS},
            summary="A built-in kind's verification_key.json (snarkjs format), at this service's scale",
            description=VK_DOC)
def get_kind_key(request: HttpRequest, kind: KindPath) -> dict[str, Any]:
    return builtin_key(kinds.circuit_for(kind, settings.PROVINGSITE["SCALE"]).circuit_id)


@router.get(f"/jobs/{{job_id}}/{VK_NAME}", response={200: VerificationKeyOut, **ERRORS},
            summary="The verification_key.json (snarkjs format) that verifies this job's proofs",
            description=VK_DOC + "; for any kind: built-in, registered circuit or uploaded zkey")
def get_job_key(request: HttpRequest, job_id: JobIdPath) -> dict[str, Any]:
    return job_key(visible_job(request, job_id))
