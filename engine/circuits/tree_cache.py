"""Sector trees built once per host, read by every process that proves the sector.

Every partition of a job opens paths of the same sector tree, and a medium tree is about 2,000
Poseidon hashes: some 40 ms of a core, against 6 ms for a medium partition's synthesis. Each
synthesis process keeps the trees it built (kinds.py's lru caches), but the engine hands a job's
partitions to whichever process is free, so with N processes a job's tree was built up to N
times: ten times per porep-c2 job on a 16-core host, most of what its synthesis cost.

Here a tree is stored under the cache directory the embedding application names (the engine
passes CACHE_DIR, as for compiled matrices), keyed by what defines it and a hash of the modules
that compute it. The first process to need a tree builds it under the key's file lock; one that
needs it meanwhile waits for it rather than building it again; later ones read it (1–2 ms at
medium, most of it turning the bytes back into Python ints). A file is whole or absent
(written aside, then renamed), carries its key and a digest of its contents, and is rebuilt
when either does not match or what it holds does not load. The newest MAX_TREES are kept: once
PRUNE_AFTER more have piled up, the oldest go (each prune stats every tree, about 2 ms for 256,
so it runs once per PRUNE_AFTER new trees rather than with every tree a job's first partition
stores).
Until a directory is named (a bare script, the circuit tests) every tree is built in the
process, as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import struct
from collections.abc import Callable
from pathlib import Path

from engine.circuits.compiled import sources_hash
from engine.prover.formats.atomic import replaced

MAX_TREES = 256  # at most ~140 KiB each (snap-update's new tree and its key): ~35 MiB of disk
PRUNE_AFTER = 32  # trees beyond MAX_TREES before the oldest are removed
MAGIC = b"PSTREE1\n"
_DIR: Path | None = None


def use_tree_cache(cache_dir: Path | str | None) -> Path | None:
    """Store sector trees under ``cache_dir``/trees from now on (None turns it off); the
    directory named before."""
    global _DIR
    before = None if _DIR is None else _DIR.parent
    _DIR = None if cache_dir is None else Path(cache_dir) / "trees"
    return before


def cached[T](key: str, build: Callable[[], T], dump: Callable[[T], bytes], load: Callable[[bytes], T]) -> T:
    """``build()``'s value for ``key``: read where a process stored it, else built here (once per
    host: under the key's lock) and stored. Any failure of the cache itself (a full or read-only
    disk) costs only the build."""
    if _DIR is None:
        return build()
    full_key = f"{sources_hash()} {key}"
    path = _DIR / f"{hashlib.sha256(full_key.encode()).hexdigest()[:32]}.tree"
    found = _loaded(path, full_key, load)
    if found is not None:
        return found
    try:
        _DIR.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_suffix(".lock"), "w")  # noqa: SIM115 - held across the build below
    except OSError:
        return build()
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _loaded(path, full_key, load)  # stored while this process waited for the lock
        if found is not None:
            return found
        value = build()
        _store(path, full_key, dump(value))
        return value


def _loaded[T](path: Path, key: str, load: Callable[[bytes], T]) -> T | None:
    """The value stored for ``key``, or None where there is none that reads back whole."""
    payload = _read(path, key)
    if payload is None:
        return None
    try:
        return load(payload)
    except ValueError:  # stored whole by other code (an older layout under the same key): rebuilt
        return None


def _read(path: Path, key: str) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = len(MAGIC) + 4
    if len(data) < head or not data.startswith(MAGIC):
        return None
    (key_len,) = struct.unpack_from("<I", data, len(MAGIC))
    start = head + key_len + 32
    if len(data) < start or data[head:head + key_len] != key.encode():
        return None
    payload = data[start:]
    if hashlib.sha256(payload).digest() != data[head + key_len:start]:
        return None
    return payload


def _store(path: Path, key: str, payload: bytes) -> None:
    encoded = key.encode()
    try:
        with replaced(path) as tmp:  # a reader sees a whole file or none
            tmp.write_bytes(MAGIC + struct.pack("<I", len(encoded)) + encoded + hashlib.sha256(payload).digest()
                            + payload)
    except OSError:
        return
    _prune(path.parent)


def _prune(folder: Path) -> None:
    """The oldest trees beyond MAX_TREES removed, with their locks, once more than PRUNE_AFTER
    beyond it are stored (counted by name alone: no stat until then)."""
    try:
        with os.scandir(folder) as entries:
            names = [entry.path for entry in entries if entry.name.endswith(".tree")]
        if len(names) <= MAX_TREES + PRUNE_AFTER:
            return
        trees = sorted(map(Path, names), key=lambda p: p.stat().st_mtime)
    except OSError:  # one removed by another process meanwhile: pruned next time
        return
    for old in trees[:-MAX_TREES]:
        for path in (old, old.with_suffix(".lock")):
            with contextlib.suppress(OSError):
                path.unlink()
