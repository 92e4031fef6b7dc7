"""Where the engine's proving keys come from, for its key cache.

A built-in kind's key lives in the params directory, made by ``manage.py setupkeys`` (or, when
the operator sets PROVINGSITE_DEV_KEYS=1, made there on first use). A job of a registered
circom circuit carries the circuit id ``circom/<sha256 of the zkey>``; its key is the circuit's
stored zkey, so one host loads it once and every job of the circuit reuses it, as the built-in
kinds' keys are. Every key loaded is checked against the farm's record of its circuit's key
(``farm_checked``): a host with another key refuses the circuit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

from engine.format import fmt_bytes
from engine.ledger.circuits import REGISTERED_ID, is_registered
from engine.ledger.keys import KeyMismatch, adopt_key
from engine.pipeline import memory
from engine.prover.formats.snarkjs_json import vk_digest

if TYPE_CHECKING:
    from engine.circuits.sizing import MemoryNeeds

log = logging.getLogger("engine")

PREFIX = "circom/"
ZKEY_NAME = "circuit.zkey"


def zkey_path(circuit_id: str) -> Path:
    found = REGISTERED_ID.match(circuit_id)
    if found is None:
        raise ValueError(f"{circuit_id!r} is not a registered circuit's id (circom/<sha256>)")
    return Path(settings.DATA_DIR) / "circuits" / found.group(1) / ZKEY_NAME


def fixed_base_enabled() -> bool:
    return bool(settings.PROVINGSITE["FIXED_BASE"])


def table_bytes(needs: MemoryNeeds) -> int:
    """What a cached key's fixed-base tables may take: reserved with the key."""
    return needs.table_bytes if fixed_base_enabled() else 0


def held_nbytes(pk: Any) -> int:
    """What a loaded key holds in memory: its arrays and its fixed-base tables."""
    from engine.prover.backends.cpu import fixed_base

    return int(pk.nbytes) + fixed_base.tables_nbytes(pk)


class KeyRefused(Exception):
    """This host will not prove a circuit: it has no key for it, or not the farm's."""


def farm_checked(load: Callable[[str], Any], host_name: Callable[[], str]) -> Callable[[str], Any]:
    """``load``, and the loaded key checked against the farm's record of the circuit's key
    (the first host to load one records it): a key with another digest is KeyRefused."""
    def checked(circuit_id: str) -> Any:
        pk = load(circuit_id)
        try:
            adopt_key(circuit_id, vk_digest(pk.vk), host_name())
        except KeyMismatch as exc:
            raise KeyRefused(str(exc)) from None
        return pk

    return checked


def load_proving_key(circuit_id: str) -> Any:
    """The circuit's proving key, with its fixed-base tables (the engine keeps the key for
    every job of the circuit). Development keys are made on first use only when the operator
    asks (PROVINGSITE_DEV_KEYS=1); otherwise a missing key is KeyRefused."""
    pk = _read_proving_key(circuit_id)
    if fixed_base_enabled():
        from engine.prover.backends.cpu import fixed_base

        started = time.monotonic()
        nbytes = fixed_base.precompute(pk)
        log.info("fixed-base tables for %s: %s in %.2f s", circuit_id, fmt_bytes(nbytes), time.monotonic() - started)
    memory.release_freed_memory()
    return pk


def _read_proving_key(circuit_id: str) -> Any:
    from engine.circuits.keystore import KeyStore
    from engine.circuits.kinds import parse_circuit_id
    from engine.prover.snarkjs import read_zkey

    if is_registered(circuit_id):  # a circom circuit registered through the API
        return read_zkey(zkey_path(circuit_id))
    shape = parse_circuit_id(circuit_id)
    keys = KeyStore(settings.PROVINGSITE["PARAMS_DIR"])
    if not keys.keys_present(shape):
        if not settings.PROVINGSITE["DEV_KEYS"]:
            raise KeyRefused(f"no proving key for {circuit_id} in {keys.params_dir}: run `manage.py setupkeys` there "
                             "(or give this host the farm's params directory), or set PROVINGSITE_DEV_KEYS=1 to make "
                             "development keys on first use")
        log.warning("making a development proving key for %s into %s (PROVINGSITE_DEV_KEYS=1)", circuit_id,
                    keys.params_dir)
        keys.ensure_keys(shape)
    return keys.load_proving_key(circuit_id)


def load_transient_bytes(circuit_id: str) -> int:
    """What reading the circuit's key holds beside the arrays it builds, while it reads: the
    zkey reader keeps the file's sections (the coefficients among them) until the arrays are
    built, about the file's size (bench/results/scale.md: 1.59 GiB above rest for an 835 MiB
    zkey whose arrays hold 828 MiB). 0 when there is no file yet (a development key made on
    first use)."""
    from engine.circuits.keystore import KeyStore

    try:
        path = zkey_path(circuit_id) if is_registered(circuit_id) else \
            KeyStore(settings.PROVINGSITE["PARAMS_DIR"]).proving_key_path(circuit_id)
        return path.stat().st_size
    except (OSError, ValueError):
        return 0
