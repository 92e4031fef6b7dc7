"""A synthesized partition's way from its synthesis process to the prover: shared memory, not
pickled arrays through a pipe.

Reserve gives each partition two blocks: the witness block (its signals: the prover reads them
until the proof is finished) and the a/b/c block (A·w, B·w, C·w, ``domain_rows`` rows each at
most: the partition lets it go the moment the device has them). The engine's block pool
(engine.pipeline.block_pool) lends them, pages allocated, from what earlier partitions let go;
a partition without a pool makes its own inside its reservation. The synthesis process maps
both by path and writes the assignment into them; the engine reads it through numpy views over
the same pages, with no copy on its side.

A block is a file on tmpfs (/dev/shm where there is one) named after the engine's process id,
so what an engine killed mid-way leaves behind is found and removed by the next engine that
starts (``remove_orphans``). A block freed is unlinked and its pages are given back at once
(``MADV_REMOVE``), even while a view of it is still alive somewhere.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from engine.prover.r1cs import Assignment

FR = 32  # bytes of one field element's row: 4 limbs of 64 bits
PREFIX = "provingsite-"
NAME = re.compile(rf"^{PREFIX}(\d+)-")


def root() -> Path:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


class HandoverError(ValueError):
    """The synthesis made more than the blocks hold: more than the partition reserved."""


@dataclass(frozen=True)
class BlockSpec:
    """What the synthesis process is given: where to write, and how much fits (picklable)."""

    witness_path: str
    witness_rows: int
    abc_path: str
    abc_rows: int  # each of a, b and c
    kept: bool = False  # the engine's block pool lent both: the process may keep them mapped


@dataclass(frozen=True)
class Written:
    """What the synthesis process wrote, how long the synthesis itself took, and when the
    process was done with it (the wall clock's seconds: the synthesis's recorded end)."""

    curve: str
    n_vars: int
    n_constraints: int
    n_public: int
    seconds: float
    finished_at: float = 0.0


# Linux maps a file's pages up front with it; elsewhere a plain shared mapping.
POPULATE = getattr(mmap, "MAP_POPULATE", 0)


def block_bytes(rows: int) -> int:
    """The bytes of a block of ``rows`` field elements."""
    return max(rows * FR, FR)  # an empty mapping is not allowed


class Block:
    """One file on tmpfs, mapped by the engine while a partition holds it.

    A block the engine keeps between partitions (engine.pipeline.block_pool) has a ``keeper``:
    letting it go hands it back there with its pages, so the next partition's synthesis writes
    into pages that exist rather than fresh ones (on this kind of VM a fresh page costs its
    fault and its zeroing: a medium partition's synthesis 9.3 → 6.5 ms into kept blocks)."""

    def __init__(self, path: Path, nbytes: int, keeper: Keeper | None = None, made: bool = False) -> None:
        self.path = path
        self.nbytes = nbytes
        self.keeper = keeper
        self.gone = False  # let go: a second let_go (the partition's last release) does nothing
        fd = os.open(path, os.O_RDWR if made else os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            if not made:
                os.ftruncate(fd, self.nbytes)
                if hasattr(os, "posix_fallocate"):
                    # The pages now, while the block is reserved (ahead of its synthesis): a full
                    # /dev/shm fails the reservation here rather than a synthesis process's write
                    # with SIGBUS, and the process writes into pages that exist.
                    os.posix_fallocate(fd, 0, self.nbytes)
            self.map = mmap.mmap(fd, self.nbytes)
        except BaseException:
            os.close(fd)
            if not made:
                path.unlink(missing_ok=True)
            raise
        os.close(fd)

    def view(self, rows: int, first_row: int = 0) -> np.ndarray:
        import numpy as np

        return np.frombuffer(self.map, dtype=np.uint64, count=4 * rows, offset=first_row * FR).reshape(rows, 4)

    def unmap(self) -> bool:
        """The engine's mapping of the file gone, so the block may be written again without
        anything here reading it change: closed, or, where a view of it is still alive, its
        pages swapped for zeros of the engine's own (that view then reads zeros, as after
        ``free``). Whether it is gone (not where the swap is unknown: not Linux)."""
        try:
            self.map.close()
        except BufferError:
            return _zeros_under(self.map, self.nbytes)
        return True

    def let_go(self) -> None:
        """The partition is done with it: back to its keeper, or freed."""
        if self.gone:
            return
        self.gone = True
        if self.keeper is not None:
            self.keeper.keep(self)
        else:
            self.free()

    def free(self) -> None:
        """Give the pages back now, and the name: a view still held reads zeros, the pages are gone."""
        self.path.unlink(missing_ok=True)
        if not self.map.closed:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                self.map.madvise(mmap.MADV_REMOVE)
            with contextlib.suppress(BufferError):  # a view still alive: it unmaps when the view goes
                self.map.close()


# mmap(2)'s flags on Linux (every architecture it runs on): not in Python's mmap module.
_MAP_FIXED, _PROT_RW = 0x10, mmap.PROT_READ | mmap.PROT_WRITE


@functools.cache
def _libc_mmap() -> Any:
    import ctypes

    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).mmap
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    return fn


def _zeros_under(mapped: mmap.mmap, nbytes: int) -> bool:
    """Replace ``mapped``'s pages, in place, by private zero pages (MAP_FIXED over its own range):
    whatever view of it is alive keeps a valid address and reads zeros; the file is no longer
    mapped there. The mmap object unmaps the range as usual when its last view goes."""
    import ctypes

    fn = _libc_mmap()
    if fn is None:
        return False
    probe = ctypes.c_char.from_buffer(mapped)  # the mapping's address (an export, dropped at once)
    address = ctypes.addressof(probe)
    del probe
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_FIXED
    return fn(address, nbytes, _PROT_RW, flags, -1, 0) == address


class Keeper(Protocol):
    def keep(self, block: Block) -> None: ...


class Blocks:
    """A partition's two blocks: made by reserve (or lent by the engine's block pool) and let
    go by it."""

    def __init__(self, witness: Block, abc: Block, witness_rows: int, domain_rows: int) -> None:
        self.witness = witness
        self.abc = abc
        self.spec = BlockSpec(str(witness.path), witness_rows, str(abc.path), domain_rows,
                              kept=witness.keeper is not None and abc.keeper is not None)

    @classmethod
    def made(cls, tag: str, witness_rows: int, domain_rows: int) -> Blocks:
        """Two new blocks of their own (freed when let go)."""
        base = root() / f"{PREFIX}{os.getpid()}-{tag}"
        witness = Block(Path(f"{base}-w"), block_bytes(witness_rows))
        try:
            abc = Block(Path(f"{base}-abc"), block_bytes(3 * domain_rows))
        except BaseException:
            witness.free()
            raise
        return cls(witness, abc, witness_rows, domain_rows)

    @property
    def kept_nbytes(self) -> int:
        """The bytes of these blocks that their keeper has reserved (not the partition)."""
        return sum(block.nbytes for block in (self.witness, self.abc) if block.keeper is not None)

    @property
    def abc_kept_nbytes(self) -> int:
        return self.abc.nbytes if self.abc.keeper is not None else 0

    def assignment(self, written: Written) -> Assignment:
        """The assignment the synthesis process wrote, as views over the blocks."""
        from engine.prover.r1cs import Assignment

        n = written.n_constraints
        return Assignment(curve=written.curve, witness=self.witness.view(written.n_vars), a=self.abc.view(n, 0),
                          b=self.abc.view(n, n), c=self.abc.view(n, 2 * n), n_public=written.n_public)

    def free_abc(self) -> None:
        self.abc.let_go()

    def free(self) -> None:
        self.abc.let_go()
        self.witness.let_go()


def _fits(spec: BlockSpec, n_vars: int, n: int) -> None:
    if n_vars > spec.witness_rows or n > spec.abc_rows:
        raise HandoverError(f"the synthesis made {n_vars} signals and {n} constraints; the partition reserved "
                            f"{spec.witness_rows} and {spec.abc_rows}")


def views(spec: BlockSpec, n_vars: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """In the synthesis process: the witness and A·w, B·w, C·w as views of the blocks, for a
    synthesis that writes there itself (no copy at all). A kept block's mapping stays for the
    next time the pool lends it (``_KEPT``); any other lives as long as its views."""
    import numpy as np

    _fits(spec, n_vars, n)
    seen = _KEPT.forget_gone() if spec.kept else {}
    out: list[np.ndarray] = []
    for path, parts in ((spec.witness_path, (n_vars,)), (spec.abc_path, (n, n, n))):
        mapped = _KEPT.mapped(path, seen.get(path)) if spec.kept else _map(path)
        offset = 0
        for rows in parts:
            out.append(np.frombuffer(mapped, dtype=np.uint64, count=4 * rows, offset=offset).reshape(rows, 4))
            offset += rows * FR
    witness, a, b, c = out
    return witness, a, b, c


def _map(path: str) -> mmap.mmap:
    fd = os.open(path, os.O_RDWR)
    try:
        # Mapped with its pages (allocated when the block was made): no fault per page as the
        # synthesis writes them.
        return mmap.mmap(fd, os.fstat(fd).st_size, flags=mmap.MAP_SHARED | POPULATE)
    finally:
        os.close(fd)


class _KeptMappings:
    """A synthesis process's mappings of the pool's blocks, by path: mapping 8 MiB again, page
    by page, cost a medium partition about 1 ms of its 7. A block the engine has freed is
    truncated and unlinked, so its mapping holds no page; it is closed at the next synthesis
    (a path gone, or a new file under the name)."""

    def __init__(self) -> None:
        self._maps: dict[str, tuple[tuple[int, int, int], mmap.mmap]] = {}

    def mapped(self, path: str, identity: tuple[int, int, int] | None = None) -> mmap.mmap:
        """``path``'s mapping, kept or made; ``identity`` where the caller has just read it."""
        identity = identity or _identity(path)
        entry = self._maps.get(path)
        if entry is not None and entry[0] == identity:
            return entry[1]
        if entry is not None:
            self._close(path)
        mapped = _map(path)
        self._maps[path] = (identity, mapped)
        return mapped

    def forget_gone(self) -> dict[str, tuple[int, int, int]]:
        """Mappings of blocks freed or replaced closed; the identities of those kept, by path."""
        kept = {}
        for path, (identity, _) in list(self._maps.items()):
            try:
                alive = _identity(path) == identity
            except OSError:
                alive = False
            if alive:
                kept[path] = identity
            else:
                self._close(path)
        return kept

    def _close(self, path: str) -> None:
        _, mapped = self._maps.pop(path)
        with contextlib.suppress(BufferError):  # a view still alive: unmapped when it goes
            mapped.close()


def _identity(path: str) -> tuple[int, int, int]:
    """The file under ``path`` now: another file, or this one truncated, is another block."""
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size


_KEPT = _KeptMappings()


def write(spec: BlockSpec, assignment: Assignment, seconds: float) -> Written:
    """In the synthesis process: ``assignment`` copied into the blocks the engine made for it
    (a circom witness, which comes from the client's generator or file), through the same
    mappings a built-in synthesis writes into."""
    import numpy as np

    n_vars, n = int(assignment.witness.shape[0]), int(assignment.a.shape[0])
    blocks = views(spec, n_vars, n)
    for out, part in zip(blocks, (assignment.witness, assignment.a, assignment.b, assignment.c), strict=True):
        np.copyto(out, part)
    del blocks
    return Written(curve=assignment.curve, n_vars=n_vars, n_constraints=n, n_public=int(assignment.n_public),
                   seconds=seconds, finished_at=time.time())


def remove_orphans(own: bool = False) -> int:
    """Blocks left by engines that are gone (killed mid-way): removed; how many. With ``own``,
    this process's blocks too (an engine stopping at once, whose partitions are handed back)."""
    removed = 0
    for path in root().glob(f"{PREFIX}*"):
        match = NAME.match(path.name)
        if match is None or (_alive(int(match.group(1))) and not (own and int(match.group(1)) == os.getpid())):
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def nbytes(spec: Any) -> int:
    """The bytes a partition's blocks take at most (inside its reservation)."""
    return block_bytes(spec.witness_rows) + block_bytes(3 * spec.abc_rows)
