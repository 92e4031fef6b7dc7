"""Where the engine's proving keys come from, for its key cache.

A built-in kind's key lives in the params directory (development keys are made there on a
fresh machine's first use). A job of a registered circom circuit carries the circuit id
``circom/<sha256 of the zkey>``; its key is the circuit's stored zkey, so one host loads it
once and every job of the circuit reuses it, as the built-in kinds' keys are.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from django.conf import settings

log = logging.getLogger("engine")

PREFIX = "circom/"
_ID = re.compile(r"^circom/([0-9a-f]{64})$")
ZKEY_NAME = "circuit.zkey"


def is_registered(circuit_id: str) -> bool:
    return _ID.match(circuit_id or "") is not None


def zkey_path(circuit_id: str) -> Path:
    found = _ID.match(circuit_id)
    if found is None:
        raise ValueError(f"{circuit_id!r} is not a registered circuit's id (circom/<sha256>)")
    return Path(settings.DATA_DIR) / "circuits" / found.group(1) / ZKEY_NAME


def load_proving_key(circuit_id: str) -> Any:
    """The circuit's proving key; a fresh machine gets development keys made on first use."""
    from engine.circuits.keystore import KeyStore
    from engine.circuits.kinds import parse_circuit_id
    from engine.prover.snarkjs import read_zkey

    if is_registered(circuit_id):  # a circom circuit registered through the API
        return read_zkey(zkey_path(circuit_id))
    shape = parse_circuit_id(circuit_id)
    keys = KeyStore(settings.PROVINGSITE["PARAMS_DIR"])
    if not keys.keys_present(shape):
        log.info("generating development proving key for %s (one time, into %s)", circuit_id, keys.params_dir)
        keys.ensure_keys(shape)
    return keys.load_proving_key(circuit_id)
