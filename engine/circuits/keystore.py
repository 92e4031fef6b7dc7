"""Proving and verifying keys of the built-in circuits, in the params directory.

Like Filecoin's parameter cache: a local setup runs once per circuit and writes

* ``<kind>-<scale>.zkey`` — the snarkjs-format proving key;
* ``<kind>-<scale>.verification_key.json`` — snarkjs's verification key;
* an entry in ``manifest.json`` — circuit id, curve, sizes and the sha256 of both files.

Loading is lazy and checked: a missing file raises ``KeyMissing``, a checksum or size
mismatch ``KeyCorrupt``; both name the file and the command that regenerates it.

The directory is the caller's to name (the engine passes settings.PROVINGSITE["PARAMS_DIR"]):
``KeyStore(params_dir)`` holds it, so the circuits never read Django's settings.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.circuits.kinds import CircuitShape, parse_circuit_id
from engine.prover.formats.atomic import replaced

MANIFEST = "manifest.json"


class KeyError_(Exception):
    """Base of the key store's errors (not the builtin KeyError)."""


class KeyMissing(KeyError_):
    pass


class KeyCorrupt(KeyError_):
    pass


def _stem(circuit_id: str) -> str:
    shape = parse_circuit_id(circuit_id)
    return f"{shape.kind}-{shape.scale}"


def regenerate_hint(circuit_id: str) -> str:
    shape = parse_circuit_id(circuit_id)
    return f"manage.py setupkeys --kind {shape.kind} --scale {shape.scale} --force"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def key_sizes(pk) -> tuple[int, int, int]:
    """(variables, public inputs, domain) of a loaded proving key."""
    return pk.n_vars, pk.n_public, pk.domain_size


def _check(circuit_id: str, path: Path, expected: dict[str, Any], which: str) -> None:
    hint = regenerate_hint(circuit_id)
    shape = parse_circuit_id(circuit_id)
    if expected.get("n_constraints") != shape.n_constraints or expected.get("n_vars") != shape.n_vars:
        raise KeyCorrupt(
            f"{path} was made for a circuit of {expected.get('n_constraints')} constraints, "
            f"{circuit_id} now has {shape.n_constraints}; regenerate it with `{hint}`"
        )
    if sha256_file(path) != expected[which]["sha256"]:
        raise KeyCorrupt(f"{path} does not match its sha256 in the manifest (corrupt or replaced); regenerate it with `{hint}`")


@dataclass(frozen=True)
class KeyStore:
    """The keys of the built-in circuits in one params directory."""

    params_dir: Path

    def proving_key_path(self, circuit_id: str) -> Path:
        return self.params_dir / f"{_stem(circuit_id)}.zkey"

    def verifying_key_path(self, circuit_id: str) -> Path:
        return self.params_dir / f"{_stem(circuit_id)}.verification_key.json"

    def read_manifest(self) -> dict[str, Any]:
        path = self.params_dir / MANIFEST
        if not path.exists():
            return {}
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise KeyCorrupt(f"{path} is not valid JSON ({exc}); remove it and run manage.py setupkeys --force") from exc

    def _write_manifest(self, manifest: dict[str, Any]) -> None:
        path = self.params_dir / MANIFEST
        with replaced(path) as tmp:  # atomic: readers see the old or the new manifest, never half
            tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One setup at a time per params directory, across processes."""
        self.params_dir.mkdir(parents=True, exist_ok=True)
        with open(self.params_dir / ".setup.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _entry(self, circuit_id: str, path: Path, which: str) -> dict[str, Any]:
        hint = regenerate_hint(circuit_id)
        if not path.exists():
            raise KeyMissing(f"{which} for {circuit_id} not found: {path}; generate it with `{hint}`")
        entry = self.read_manifest().get(circuit_id)
        if entry is None:
            raise KeyMissing(f"{path} has no entry in {self.params_dir / MANIFEST}; regenerate it with `{hint}`")
        return entry

    def load_proving_key(self, circuit_id: str):
        """The circuit's ProvingKey, read from the params directory after checking its checksum."""
        from engine.prover.snarkjs import read_zkey

        path = self.proving_key_path(circuit_id)
        _check(circuit_id, path, self._entry(circuit_id, path, "proving key"), "zkey")
        try:
            return read_zkey(path)
        except Exception as exc:  # a reader error on a checksummed file still means "regenerate"
            raise KeyCorrupt(f"{path} could not be read ({exc}); regenerate it with `{regenerate_hint(circuit_id)}`") from exc

    def load_verifying_key(self, circuit_id: str):
        from engine.prover.snarkjs import read_vk_json

        path = self.verifying_key_path(circuit_id)
        _check(circuit_id, path, self._entry(circuit_id, path, "verification key"), "verification_key")
        try:
            return read_vk_json(path)
        except Exception as exc:
            raise KeyCorrupt(f"{path} could not be read ({exc}); regenerate it with `{regenerate_hint(circuit_id)}`") from exc

    def keys_present(self, shape: CircuitShape) -> bool:
        cid = shape.circuit_id
        try:
            for path, which in ((self.proving_key_path(cid), "zkey"), (self.verifying_key_path(cid), "verification_key")):
                _check(cid, path, self._entry(cid, path, which), which)
        except KeyError_:
            return False
        return True

    def ensure_keys(self, shape: CircuitShape, *, force: bool = False, seed: int | None = None) -> Path:
        """Run the local setup for ``shape`` unless valid keys exist; returns the zkey's path."""
        from engine.prover.setup import setup
        from engine.prover.snarkjs import write_vk_json, write_zkey

        with self._locked():
            zkey = self.proving_key_path(shape.circuit_id)
            vkey = self.verifying_key_path(shape.circuit_id)
            if not force and self.keys_present(shape):
                return zkey
            started = time.perf_counter()
            pk, vk = setup(shape.r1cs(), seed=seed)
            for path, write in ((zkey, lambda p: write_zkey(p, pk)), (vkey, lambda p: write_vk_json(p, vk))):
                with replaced(path) as tmp:
                    write(tmp)
            manifest = self.read_manifest()
            manifest[shape.circuit_id] = {
                "circuit_id": shape.circuit_id,
                "curve": shape.curve,
                "n_constraints": shape.n_constraints,
                "n_vars": shape.n_vars,
                "n_public": shape.n_public,
                "domain_size": shape.domain_size,
                "zkey": {"file": zkey.name, "bytes": zkey.stat().st_size, "sha256": sha256_file(zkey)},
                "verification_key": {"file": vkey.name, "bytes": vkey.stat().st_size, "sha256": sha256_file(vkey)},
                "setup_seconds": round(time.perf_counter() - started, 3),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            self._write_manifest(manifest)
            return zkey
