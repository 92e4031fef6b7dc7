"""snarkjs's JSON files: proof.json, public.json, verification_key.json.

numpy-free (an array of public inputs is converted by curves.py, which imports it then), and
the keys' module comes in only for a verification key: the command-line prover writes its
files through here and starts without either.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.prover.datatypes import Proof
from engine.prover.formats.atomic import replaced
from engine.prover.formats.errors import FormatError
from engine.prover.params.curves import CURVES

if TYPE_CHECKING:
    import numpy as np

    from engine.prover.keys import VerifyingKey

# ---------------------------------------------------------------------------------------------
# JSON


def _g1_json(pt: tuple[int, int] | None) -> list[str]:
    return ["0", "1", "0"] if pt is None else [str(pt[0]), str(pt[1]), "1"]


def _g2_json(pt: tuple[tuple[int, int], tuple[int, int]] | None) -> list[list[str]]:
    if pt is None:
        return [["0", "0"], ["1", "0"], ["0", "0"]]
    (x0, x1), (y0, y1) = pt
    return [[str(x0), str(x1)], [str(y0), str(y1)], ["1", "0"]]


def _int(v: Any, what: str, field: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise FormatError(field, f"{what}: expected a decimal string, got {v!r}")
    try:
        return int(v)
    except ValueError:
        raise FormatError(field, f"{what}: {v!r} is not a decimal integer") from None


def _g1_from_json(v: Any, what: str, field: str) -> tuple[int, int] | None:
    if not isinstance(v, list) or len(v) not in (2, 3):
        raise FormatError(field, f"{what}: expected [x, y, z]")
    x, y = _int(v[0], what, field), _int(v[1], what, field)
    z = _int(v[2], what, field) if len(v) == 3 else 1
    if z == 0:
        return None
    if z != 1:
        raise FormatError(field, f"{what}: only affine points (z = 1) are accepted")
    return (x, y)


def _g2_from_json(v: Any, what: str, field: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
    if not isinstance(v, list) or len(v) not in (2, 3) or not all(isinstance(e, list) and len(e) == 2 for e in v):
        raise FormatError(field, f"{what}: expected [[x0, x1], [y0, y1], [z0, z1]]")
    x = (_int(v[0][0], what, field), _int(v[0][1], what, field))
    y = (_int(v[1][0], what, field), _int(v[1][1], what, field))
    z = (_int(v[2][0], what, field), _int(v[2][1], what, field)) if len(v) == 3 else (1, 0)
    if z == (0, 0):
        return None
    if z != (1, 0):
        raise FormatError(field, f"{what}: only affine points (z = 1) are accepted")
    return (x, y)


def proof_to_json(proof: Proof) -> dict[str, Any]:
    return {
        "pi_a": _g1_json(proof.pi_a),
        "pi_b": _g2_json(proof.pi_b),
        "pi_c": _g1_json(proof.pi_c),
        "protocol": "groth16",
        "curve": proof.curve,
    }


def proof_from_json(obj: Any, curve: str | None = None) -> Proof:
    """``curve`` is the verifying key's, for a proof that names none: rapidsnark writes no
    "curve" field, and snarkjs takes the curve from the key too."""
    if not isinstance(obj, dict):
        raise FormatError("proof", "proof: expected a JSON object")
    if obj.get("protocol", "groth16") != "groth16":
        raise FormatError("proof", f"proof: protocol {obj.get('protocol')!r} is not groth16")
    named = obj.get("curve")
    if named is not None and curve is not None and named != curve:
        raise FormatError("proof", f"proof: curve {named!r}, but the key is over {curve!r}")
    curve = named if named is not None else curve
    if curve not in CURVES:
        raise FormatError("proof", f"proof: unknown curve {curve!r}")
    return Proof(
        curve=curve,
        pi_a=_g1_from_json(obj.get("pi_a"), "proof pi_a", "proof"),
        pi_b=_g2_from_json(obj.get("pi_b"), "proof pi_b", "proof"),
        pi_c=_g1_from_json(obj.get("pi_c"), "proof pi_c", "proof"),
    )


def _dump(path: str | os.PathLike[str], obj: Any) -> None:
    with replaced(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=1) + "\n")


def write_proof_json(path: str | os.PathLike[str], proof: Proof) -> None:
    _dump(path, proof_to_json(proof))


def read_proof_json(path: str | os.PathLike[str], curve: str | None = None) -> Proof:
    return proof_from_json(_load(path, "proof"), curve)


def public_to_json(public_inputs: Sequence[int] | np.ndarray) -> list[str]:
    if not isinstance(public_inputs, Sequence):  # an (n, 4) array of limbs (numpy is not imported here)
        from engine.prover.params.curves import limbs_to_ints

        public_inputs = limbs_to_ints(public_inputs) if public_inputs.size else []
    return [str(int(v)) for v in public_inputs]


def write_public_json(path: str | os.PathLike[str], public_inputs: Sequence[int] | np.ndarray) -> None:
    _dump(path, public_to_json(public_inputs))


def read_public_json(path: str | os.PathLike[str]) -> list[int]:
    obj = _load(path, "public")
    if not isinstance(obj, list):
        raise FormatError("public", f"{path}: expected a JSON list of decimal strings")
    return [_int(v, f"{path} entry {i}", "public") for i, v in enumerate(obj)]


def _load(path: str | os.PathLike[str], field: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise FormatError(field, f"{path}: not valid JSON ({e})") from None


def _vk_identity_json(vk: VerifyingKey) -> dict[str, Any]:
    """verification_key.json's defining fields (_VK_IDENTITY), in its order."""
    return {
        "protocol": "groth16",
        "curve": vk.curve,
        "nPublic": vk.n_public,
        "vk_alpha_1": _g1_json(vk.alpha1),
        "vk_beta_2": _g2_json(vk.beta2),
        "vk_gamma_2": _g2_json(vk.gamma2),
        "vk_delta_2": _g2_json(vk.delta2),
        "IC": [_g1_json(p) for p in vk.ic],
    }


def vk_to_json(vk: VerifyingKey, alphabeta_12: list[list[list[int]]]) -> dict[str, Any]:
    """verification_key.json's object. ``alphabeta_12`` is e(alpha1, beta2) in snarkjs's tower
    layout (engine.prover.verify.alphabeta_12): a pairing, which a format does not compute
    (engine.prover.snarkjs.vk_to_json passes it)."""
    body = _vk_identity_json(vk)
    ic = body.pop("IC")  # snarkjs writes vk_alphabeta_12 before IC
    body["vk_alphabeta_12"] = [[[str(x) for x in fp2] for fp2 in fp6] for fp6 in alphabeta_12]
    body["IC"] = ic
    return body


# The fields that make a verifying key (vk_alphabeta_12 is derived from two of them).
_VK_IDENTITY = ("protocol", "curve", "nPublic", "vk_alpha_1", "vk_beta_2", "vk_gamma_2", "vk_delta_2", "IC")


def vk_digest_of_json(vk_json: dict[str, Any]) -> str:
    """SHA-256 of a verification_key.json's defining fields, as compact JSON with sorted keys:
    what a client recomputes from the file it downloaded to know which key a proof is under."""
    import hashlib  # OpenSSL's import is 3 ms of a small proof's command, which needs no digest

    identity = {name: vk_json[name] for name in _VK_IDENTITY}
    return hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def vk_digest(vk: VerifyingKey) -> str:
    return vk_digest_of_json(_vk_identity_json(vk))


def write_vk_json(path: str | os.PathLike[str], vk: VerifyingKey, alphabeta_12: list[list[list[int]]]) -> None:
    _dump(path, vk_to_json(vk, alphabeta_12))


def vk_from_json(obj: Any) -> VerifyingKey:
    if not isinstance(obj, dict) or obj.get("protocol") != "groth16":
        raise FormatError("vk", "verification key: expected a groth16 verification_key.json object")
    curve = obj.get("curve")
    if curve not in CURVES:
        raise FormatError("vk", f"verification key: unknown curve {curve!r}")
    ic = obj.get("IC")
    if not isinstance(ic, list):
        raise FormatError("vk", "verification key: IC missing")
    n_public = _int(obj.get("nPublic"), "verification key nPublic", "vk")
    if len(ic) != n_public + 1:
        raise FormatError("vk", f"verification key: {len(ic)} IC points for nPublic = {n_public}")
    beta, gamma, delta = (_g2_from_json(obj.get(k), f"verification key {k}", "vk")
                          for k in ("vk_beta_2", "vk_gamma_2", "vk_delta_2"))
    from engine.prover.keys import VerifyingKey  # the keys' module (and dataclasses) only for a key

    alpha = _g1_from_json(obj.get("vk_alpha_1"), "verification key vk_alpha_1", "vk")
    points = tuple(_g1_from_json(p, f"verification key IC[{i}]", "vk") for i, p in enumerate(ic))
    try:  # the points parsed first: a FormatError is a ValueError too, and says its own point
        return VerifyingKey.of_points(curve, n_public, alpha, beta, gamma, delta, points)
    except ValueError as e:
        raise FormatError("vk", str(e)) from None


def read_vk_json(path: str | os.PathLike[str]) -> VerifyingKey:
    return vk_from_json(_load(path, "vk"))
