"""A circuit's constraint matrices and witness program, compiled once per process and cached on disk.

Compiling a 2^20-constraint shape in Python takes tens of seconds; every synthesis worker
process would pay it. The matrices are stored once under the cache directory the embedding
application names (the engine passes CACHE_DIR), keyed by the circuit and a hash of the
modules that define it, so an edited circuit never reads stale matrices. Until one is
named (a bare script) there is no disk cache.

Compiling peaks at about COMPILE_PEAK times the matrices it makes (the rows as Python lists
before they become arrays: 4.0× at small, 4.6× at medium, 4.8× at 2^20) and leaves the heap
about twice their size after. So where there is a disk cache, a shape is compiled by a
short-lived child (engine.circuits.compile_apart) that gives all of it back when it exits, and
the process then reads the matrices from the cache at their own size.
first_use_bytes says what a process holds while it first uses a shape and after, which the
engine reserves (engine.pipeline.synthesize).

The witness program (engine.circuits.program) is recorded by the same run of the circuit and
stored in the same file: a flag per row and an operation per input, checked sound when it is
compiled and bounded when it is read back.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.circuits.cs import ShapeCS
from engine.circuits.program import ARRAYS, Recording, WitnessProgram, check_bounds, check_program, indexed, record
from engine.prover.formats.atomic import replaced
from engine.prover.r1cs import R1CS

if TYPE_CHECKING:
    from engine.circuits.kinds import CircuitShape


@dataclass(frozen=True)
class CompiledShape:
    r1cs: R1CS
    program: WitnessProgram


_COMPILED: dict[CircuitShape, CompiledShape] = {}


def already_compiled(shape: CircuitShape) -> CompiledShape | None:
    """The matrices and program if this process has them already (counting them is then free)."""
    return _COMPILED.get(shape)


def keep_only(shape: CircuitShape | None) -> None:
    """Drop every other shape's matrices (all, for None): a synthesis process keeps one
    circuit's, so what the engine reserves for them per process is bounded
    (engine.pipeline.synthesize)."""
    for other in [s for s in _COMPILED if s != shape]:
        del _COMPILED[other]


COMPILE_PEAK = 5
CHILD_BASE = 32 << 20  # the child's interpreter, numpy and circuit modules (28 MiB measured)


def compiled(shape: CircuitShape) -> R1CS:
    return compiled_shape(shape).r1cs


def witness_program(shape: CircuitShape) -> WitnessProgram:
    return compiled_shape(shape).program


def compiled_shape(shape: CircuitShape) -> CompiledShape:
    if shape not in _COMPILED:
        done = _load_cached(shape)
        if done is None and compiles_apart(shape):
            _compile_apart(shape)
            done = _load_cached(shape)
        if done is None:  # no disk cache, or one the child could not write
            done = compile_shape(shape)
            store_cached(shape, done)
        _COMPILED[shape] = done
    return _COMPILED[shape]


def compile_shape(shape: CircuitShape) -> CompiledShape:
    """Run the circuit once on its data's slots: its matrices and its witness program."""
    r1cs, recording = _recorded(shape)  # its Python rows given back before the index and the checks
    done = CompiledShape(r1cs=r1cs, program=indexed(recording, r1cs))
    check_program(done.r1cs, done.program)
    return done


def _recorded(shape: CircuitShape) -> tuple[R1CS, Recording]:
    cs = ShapeCS()
    data = shape.placeholder_data()
    shape.define(cs, data.slots())
    return cs.compile(), record(cs, slots=len(data.flat()))


def on_disk(shape: CircuitShape) -> bool:
    path = _cache_path(shape)
    return path is not None and path.exists()


def compiles_apart(shape: CircuitShape) -> bool:
    return _DISK_CACHE is not None


def first_use_bytes(shape: CircuitShape, child_base: int = CHILD_BASE) -> tuple[int, int]:
    """(while, after): what a process that does not hold the shape's matrices takes while it
    first uses them (reading the cache, or compiling) and what it keeps after; ``child_base``
    is what a compiling child's interpreter counts (0 where processes are not charged). A
    compile in place keeps what it grew the heap by, so it is counted at its peak throughout."""
    steady = shape.compiled_bytes
    if on_disk(shape):
        return steady, steady
    if compiles_apart(shape):
        return COMPILE_PEAK * steady + child_base, steady
    return COMPILE_PEAK * steady, COMPILE_PEAK * steady


def _compile_apart(shape: CircuitShape) -> None:
    """Compile into the disk cache in a child process. Killed (the kernel's OOM killer) it is
    a MemoryError another attempt may get past; any other failure is the circuit's."""
    assert _DISK_CACHE is not None
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "engine.circuits.compile_apart", shape.kind, shape.scale, str(_DISK_CACHE.parent)],
        cwd=root, capture_output=True, text=True, check=False)
    if done.returncode < 0:
        raise MemoryError(f"compiling {shape.kind}/{shape.scale} was killed by signal {-done.returncode}")
    if done.returncode:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"compiling {shape.kind}/{shape.scale} failed: {tail}")


_DISK_CACHE: Path | None = None


def use_disk_cache(cache_dir: Path | str | None) -> None:
    """Store compiled matrices under ``cache_dir``/circuits from now on; None turns it off."""
    global _DISK_CACHE
    _DISK_CACHE = None if cache_dir is None else Path(cache_dir) / "circuits"


_SOURCES = ("cs.py", "program.py", "gadgets.py", "grain.py", "poseidon.py", "poseidon_constants.py", "merkle.py",
            "kinds.py")


@functools.cache
def sources_hash() -> str:
    import hashlib

    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in _SOURCES:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:16]


def _cache_path(shape: CircuitShape) -> Path | None:
    return None if _DISK_CACHE is None else _DISK_CACHE / f"{shape.kind}-{shape.scale}-{sources_hash()}.npz"


def _load_cached(shape: CircuitShape) -> CompiledShape | None:
    import numpy as np

    from engine.prover.r1cs import SparseMatrix

    path = _cache_path(shape)
    if path is None or not path.exists():
        return None
    try:
        with np.load(path) as z:
            mats = [SparseMatrix(row_ptr=z[f"{m}_row_ptr"], cols=z[f"{m}_cols"], coeffs=z[f"{m}_coeffs"]) for m in "abc"]
            n_vars, n_public, slots = (int(x) for x in z["sizes"])
            program = WitnessProgram(slots=slots, **{name: z[f"program_{name}"] for name in ARRAYS})
        r1cs = R1CS(curve=shape.curve, n_vars=n_vars, n_public=n_public, a=mats[0], b=mats[1], c=mats[2])
        check_bounds(r1cs, program)
    except (OSError, ValueError, KeyError):  # ValueError: a ProgramError too
        return None  # unreadable: recompile and overwrite
    return CompiledShape(r1cs=r1cs, program=program)


def store_cached(shape: CircuitShape, done: CompiledShape) -> None:
    import numpy as np

    path = _cache_path(shape)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        r1cs, program = done.r1cs, done.program
        arrays = {f"{name}_{part}": getattr(getattr(r1cs, name), part) for name in "abc" for part in ("row_ptr", "cols", "coeffs")}
        arrays |= {f"program_{name}": getattr(program, name) for name in ARRAYS}
        with replaced(path, ".npz") as tmp:  # atomic: concurrent workers read a whole file or none
            np.savez(tmp, sizes=np.array([r1cs.n_vars, r1cs.n_public, program.slots]), **arrays)
    except OSError:
        pass  # a read-only or full cache directory only costs the recompile


