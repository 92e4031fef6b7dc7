"""Tests for the prover's arithmetic kernels, against independent oracles (Python ints,
py_ecc, py_arkworks_bls12381). Shared oracle helpers live here."""

from __future__ import annotations

from typing import Any

import py_ecc.bls12_381  # noqa: F401  imported once up front: it raises the recursion limit,
import py_ecc.bn128  # noqa: F401  which hypothesis warns about when it happens mid-test

from engine.prover.params.curves import CurveParams


def ecc(c: CurveParams) -> Any:
    """py_ecc's pure-Python implementation of the curve."""
    if c.name == "bn128":
        from py_ecc import bn128

        return bn128
    from py_ecc import bls12_381

    return bls12_381


def ecc_g1(c: CurveParams, pt: tuple[int, int] | None) -> Any:
    m = ecc(c)
    return None if pt is None else (m.FQ(pt[0]), m.FQ(pt[1]))


def ecc_g1_ints(pt: Any) -> tuple[int, int] | None:
    return None if pt is None else (int(pt[0]), int(pt[1]))


def ecc_g2_ints(pt: Any) -> tuple[tuple[int, int], tuple[int, int]] | None:
    if pt is None:
        return None
    x, y = pt
    return ((int(x.coeffs[0]), int(x.coeffs[1])), (int(y.coeffs[0]), int(y.coeffs[1])))


def ecc_g2(c: CurveParams, pt: tuple[tuple[int, int], tuple[int, int]] | None) -> Any:
    m = ecc(c)
    if pt is None:
        return None
    (x0, x1), (y0, y1) = pt
    return (m.FQ2([x0, x1]), m.FQ2([y0, y1]))
