"""The instruction-set variants of the CPU kernels (generic, bmi2-adx) compute the same bits.

The variant is picked at import from the CPU's flags; these tests load both side by side
(where this CPU runs bmi2/adx) and compare them on random inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prover.backends.cpu import native
from engine.prover.config import ProverConfig, current, using
from engine.prover.params.curves import CURVES

CURVE_NAMES = sorted(CURVES)
needs_bmi2_adx = pytest.mark.skipif(not native.cpu_supports("bmi2-adx"), reason="this CPU lacks bmi2/adx")


def _call(isa: str, name: str, out: np.ndarray, *arrays: np.ndarray, tail: tuple[int, ...] = ()) -> np.ndarray:
    ffi, lib = native.build_isa(isa)
    ptrs: list[Any] = [ffi.cast("uint64_t *", a.ctypes.data) for a in (out, *arrays)]
    getattr(lib, name)(*ptrs, *tail)
    return out


def _limbs(values: list[int], width: int) -> np.ndarray:
    raw = b"".join(v.to_bytes(8 * width, "little") for v in values)
    return np.frombuffer(raw, dtype="<u8").reshape(len(values), width).copy()


def test_generic_variant_is_always_available() -> None:
    assert native.cpu_supports("generic")
    assert native.select_isa() in native.ISA_FLAGS


def test_forcing_an_unknown_variant_is_refused() -> None:
    with using(current().but(isa="avx9000")), pytest.raises(ValueError, match="avx9000"):
        native.select_isa()


def test_the_environment_names_the_variant_where_no_application_configures_one() -> None:
    assert ProverConfig.from_env({native.ISA_ENV: " generic "}).isa == "generic"


@needs_bmi2_adx
@pytest.mark.parametrize("curve", CURVE_NAMES)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_field_multiplication_agrees_across_variants(curve: str, data: st.DataObject) -> None:
    c = CURVES[curve]
    xs = data.draw(st.lists(st.integers(0, c.p - 1), min_size=1, max_size=64))
    ys = data.draw(st.lists(st.integers(0, c.p - 1), min_size=len(xs), max_size=len(xs)))
    a, b = _limbs(xs, c.fp_limbs), _limbs(ys, c.fp_limbs)
    outs = [_call(isa, f"{c.name}_fp_vec_op", np.empty_like(a), a, b, tail=(len(xs), 2, 1))
            for isa in ("generic", "bmi2-adx")]
    assert np.array_equal(outs[0], outs[1])
    assert [int.from_bytes(r.tobytes(), "little") for r in outs[1]] == [x * y % c.p for x, y in zip(xs, ys, strict=True)]


@needs_bmi2_adx
@pytest.mark.parametrize("curve", CURVE_NAMES)
@pytest.mark.parametrize("group", ["g1", "g2"])
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_msm_agrees_across_variants(curve: str, group: str, data: st.DataObject) -> None:
    c = CURVES[curve]
    ks = data.draw(st.lists(st.integers(0, c.r - 1), min_size=1, max_size=300))
    scalars = _limbs(ks, 4)
    bases = getattr(native, f"{group}_mul_generator_batch")(curve, _limbs(ks[::-1], 4))
    no_rows = native.build_isa("generic")[0].NULL  # every row
    outs = [_call(isa, f"{c.name}_{group}_msm", np.zeros(bases.shape[1], np.uint64), bases, scalars,
                  tail=(no_rows, len(ks), 2)) for isa in ("generic", "bmi2-adx")]
    assert np.array_equal(outs[0], outs[1])
    # and both equal the sum the selected build computes through the public API
    assert np.array_equal(outs[0], getattr(native, f"msm_{group}")(curve, bases, scalars))
