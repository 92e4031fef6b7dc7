"""A circuit's matrices and witness program are compiled once per cache, by a child process
whose peak (several times the matrices) goes back to the system when it exits; a process reads
them at their own size, and says beforehand what its first use takes
(engine.pipeline.synthesize reserves it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engine.circuits import compiled
from engine.circuits.kinds import circuit_for

SHAPE = circuit_for("winning-post", "tiny")


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty matrices cache, and this process holding no matrices of SHAPE (both as they
    were again after the test)."""
    monkeypatch.setattr(compiled, "_DISK_CACHE", tmp_path / "circuits")
    monkeypatch.delitem(compiled._COMPILED, SHAPE, raising=False)
    yield tmp_path
    compiled._COMPILED.pop(SHAPE, None)


def test_with_a_disk_cache_a_shape_is_compiled_by_a_child_never_in_this_process(fresh_cache, monkeypatch) -> None:
    def in_place(shape: object) -> None:
        raise AssertionError("compiled in the caller's process")

    monkeypatch.setattr(compiled, "compile_shape", in_place)
    done = compiled.compiled_shape(SHAPE)
    assert compiled.on_disk(SHAPE)
    monkeypatch.undo()
    reference = compiled.compile_shape(SHAPE)
    for name in "abc":
        for part in ("row_ptr", "cols", "coeffs"):
            assert np.array_equal(getattr(getattr(done.r1cs, name), part), getattr(getattr(reference.r1cs, name), part))
    assert (done.r1cs.n_vars, done.r1cs.n_public) == (reference.r1cs.n_vars, reference.r1cs.n_public)
    for part in ("ops", "solves", "b_src"):
        assert np.array_equal(getattr(done.program, part), getattr(reference.program, part))
    assert done.program.slots == reference.program.slots


def test_the_first_use_takes_the_compiles_peak_until_the_cache_has_the_shape(fresh_cache) -> None:
    steady = SHAPE.compiled_bytes
    assert compiled.first_use_bytes(SHAPE, child_base=1000) == (compiled.COMPILE_PEAK * steady + 1000, steady)
    compiled.compiled(SHAPE)
    assert compiled.first_use_bytes(SHAPE, child_base=1000) == (steady, steady)


def test_without_a_disk_cache_a_compile_in_place_is_counted_at_its_peak_throughout(fresh_cache, monkeypatch) -> None:
    monkeypatch.setattr(compiled, "_DISK_CACHE", None)
    peak = compiled.COMPILE_PEAK * SHAPE.compiled_bytes
    assert compiled.first_use_bytes(SHAPE) == (peak, peak)


def test_a_child_that_fails_names_the_circuit_and_its_error(fresh_cache, monkeypatch) -> None:
    monkeypatch.setattr("sys.executable", "/bin/false")
    with pytest.raises(RuntimeError, match="compiling winning-post/tiny failed"):
        compiled.compiled(SHAPE)
