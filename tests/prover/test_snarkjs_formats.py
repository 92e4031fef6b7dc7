"""snarkjs file formats: the committed snarkjs fixtures read back exactly, our writers round-trip,
and malformed files fail with FormatError (never a crash or a silently wrong key)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.prover.groth16 import assignment_from_r1cs, check_satisfied
from engine.prover.snarkjs import (
    FormatError,
    read_proof_json,
    read_r1cs,
    read_vk_json,
    read_wtns,
    read_wtns_with_curve,
    read_zkey,
    vk_to_json,
    write_r1cs,
    write_wtns,
    write_zkey,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snarkjs"
CURVES = ["bn128", "bls12381"]


@pytest.mark.parametrize("curve", CURVES)
def test_fixture_zkey_header_and_vk(curve: str) -> None:
    d = FIXTURES / curve
    pk = read_zkey(d / "circuit.zkey")
    r1cs = read_r1cs(d / "circuit.r1cs")
    assert pk.curve == curve == r1cs.curve
    assert (pk.n_vars, pk.n_public, pk.n_constraints) == (r1cs.n_vars, r1cs.n_public, r1cs.n_constraints)
    assert pk.domain_size == r1cs.domain_size == 256
    # the key's own verifying key is the one snarkjs exported, and we export it identically,
    # e(alpha, beta) in snarkjs's Fp12 layout included
    assert pk.vk == read_vk_json(d / "verification_key.json")
    assert vk_to_json(pk.vk) == json.loads((d / "verification_key.json").read_text())
    assert pk.nbytes > pk.h_points.nbytes


@pytest.mark.parametrize("curve", CURVES)
def test_fixture_witness_satisfies_fixture_r1cs(curve: str) -> None:
    d = FIXTURES / curve
    found, w = read_wtns_with_curve(d / "witness.wtns")
    assert found == curve
    r1cs = read_r1cs(d / "circuit.r1cs")
    asg = assignment_from_r1cs(r1cs, w)
    check_satisfied(curve, asg.a, asg.b, asg.c)  # raises on any failing row
    # and the zkey's A/B (section 4) agree with the r1cs's A/B on the circuit rows
    pk = read_zkey(d / "circuit.zkey")
    from engine.prover.groth16 import assignment_from_witness

    z = assignment_from_witness(pk, w)
    assert np.array_equal(z.a, asg.a) and np.array_equal(z.b, asg.b) and np.array_equal(z.c, asg.c)
    pub = json.loads((d / "public.json").read_text())
    assert [int(x) for x in pub] == [int.from_bytes(row.astype("<u8").tobytes(), "little") for row in w[1:3]]


@pytest.mark.parametrize("curve", CURVES)
def test_roundtrips(curve: str, tmp_path: Path) -> None:
    d = FIXTURES / curve
    r1cs = read_r1cs(d / "circuit.r1cs")
    write_r1cs(tmp_path / "c.r1cs", r1cs)
    back = read_r1cs(tmp_path / "c.r1cs")
    for name in ("a", "b", "c"):
        m1, m2 = getattr(r1cs, name), getattr(back, name)
        assert np.array_equal(m1.row_ptr, m2.row_ptr) and np.array_equal(m1.cols, m2.cols)
        assert np.array_equal(m1.coeffs, m2.coeffs)
    w = read_wtns(d / "witness.wtns", curve)
    write_wtns(tmp_path / "w.wtns", curve, w)
    assert (tmp_path / "w.wtns").read_bytes() == (d / "witness.wtns").read_bytes()
    pk = read_zkey(d / "circuit.zkey")
    write_zkey(tmp_path / "k.zkey", pk)
    pk2 = read_zkey(tmp_path / "k.zkey")
    for name in (
        "alpha1",
        "beta1",
        "beta2",
        "gamma2",
        "delta1",
        "delta2",
        "ic",
        "a_points",
        "b1_points",
        "b2_points",
        "c_points",
        "h_points",
    ):
        assert np.array_equal(getattr(pk, name), getattr(pk2, name)), name
    for name in ("a_matrix", "b_matrix"):
        m1, m2 = getattr(pk, name), getattr(pk2, name)
        assert np.array_equal(m1.row_ptr, m2.row_ptr) and np.array_equal(m1.coeffs, m2.coeffs)
    assert pk2.n_constraints == pk.n_constraints and pk2.cs_hash == pk.cs_hash


def test_malformed_files_are_format_errors(tmp_path: Path) -> None:
    d = FIXTURES / "bls12381"
    data = (d / "circuit.zkey").read_bytes()
    (tmp_path / "trunc.zkey").write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match="section"):
        read_zkey(tmp_path / "trunc.zkey")
    with pytest.raises(FormatError, match="not a snarkjs .zkey file"):
        read_zkey(d / "witness.wtns")
    with pytest.raises(FormatError, match="too short"):
        (tmp_path / "empty.wtns").write_bytes(b"")
        read_wtns(tmp_path / "empty.wtns")
    with pytest.raises(FormatError, match="expected bn128"):
        read_wtns(d / "witness.wtns", "bn128")
    w = bytearray((d / "witness.wtns").read_bytes())
    w[-32:] = b"\xff" * 32  # a witness value >= r
    (tmp_path / "big.wtns").write_bytes(bytes(w))
    with pytest.raises(FormatError, match="not reduced"):
        read_wtns(tmp_path / "big.wtns")
    (tmp_path / "p.json").write_text('{"pi_a": ["1", "x", "1"], "curve": "bn128"}')
    with pytest.raises(FormatError, match="pi_a"):
        read_proof_json(tmp_path / "p.json")



@pytest.mark.parametrize("curve", CURVES)
def test_a_verification_key_with_a_fixed_point_at_infinity_is_refused_naming_it(curve: str, tmp_path: Path) -> None:
    vk = json.loads((FIXTURES / curve / "verification_key.json").read_text())
    vk["vk_gamma_2"][2] = ["0", "0"]  # z = 0: the point at infinity
    (tmp_path / "vk.json").write_text(json.dumps(vk))
    with pytest.raises(FormatError, match="verification key: the point at infinity as gamma2") as refused:
        read_vk_json(tmp_path / "vk.json")
    assert refused.value.field == "vk"

    pk = read_zkey(FIXTURES / curve / "circuit.zkey")
    pk.delta2 = np.zeros_like(pk.delta2)  # all-zero limbs: the kernels' point at infinity
    with pytest.raises(ValueError, match="the point at infinity as delta2"):
        pk.vk  # noqa: B018 (the property builds and checks the key)


@pytest.mark.parametrize("curve", CURVES)
def test_the_constraints_alone_read_from_a_zkey_are_the_full_keys_matrices(curve: str) -> None:
    from engine.prover.snarkjs import read_zkey_constraints

    full, only = read_zkey(FIXTURES / curve / "circuit.zkey"), read_zkey_constraints(FIXTURES / curve / "circuit.zkey")
    assert (only.curve, only.n_vars, only.n_public, only.n_constraints) == (
        full.curve, full.n_vars, full.n_public, full.n_constraints)
    for name in ("a_matrix", "b_matrix"):
        mine, theirs = getattr(only, name), getattr(full, name)
        assert np.array_equal(mine.row_ptr, theirs.row_ptr) and np.array_equal(mine.cols, theirs.cols)
        assert np.array_equal(mine.coeffs, theirs.coeffs)


def test_a_proof_that_names_no_curve_reads_with_the_keys_curve_as_snarkjs_does() -> None:
    from engine.prover.snarkjs import proof_from_json

    written = json.loads((FIXTURES / "bn128" / "proof.json").read_text())
    del written["curve"]  # what rapidsnark writes
    assert proof_from_json(written, "bn128").curve == "bn128"
    with pytest.raises(FormatError, match="unknown curve"):
        proof_from_json(written)
    with pytest.raises(FormatError, match="the key is over"):
        proof_from_json({**written, "curve": "bn128"}, "bls12381")
