"""The command line's prover (engine.prover.zkey_prover): a proof from a mapped .zkey and a
.wtns, no numpy, through the engine's one orchestration (a MappedKey and a ZkeyStatement on the
CPU backend). It proves what the engine's path (the key read into arrays, an Assignment)
proves, byte for byte, passes the independent verifier, and refuses bad files naming what is
wrong."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from engine.prover import groth16, zkey_prover
from engine.prover.backends.cpu.backend import CpuBackend
from engine.prover.datatypes import FormatError, InvalidProof, ProofAborted
from engine.prover.params.curves import get_curve
from engine.prover.r1cs import R1CS, SparseMatrix
from engine.prover.setup import setup, synthetic_circuit
from engine.prover.snarkjs import read_wtns, read_zkey, section_table, write_wtns, write_zkey
from tests.prover.reference_verify import reference_verify

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snarkjs"
CURVES = ["bn128", "bls12381"]
R, S = 0x1234_5678_9ABC_DEF0_1122_3344, 0xFEDC_BA98_7654_3210_5566_7788


def snarkjs_fixture(curve: str) -> tuple[Path, Path]:
    return FIXTURES / curve / "circuit.zkey", FIXTURES / curve / "witness.wtns"


def our_circuit(curve: str, tmp_path: Path, r1cs: R1CS | None = None, w: np.ndarray | None = None) -> tuple[Path, Path]:
    """A key from our setup (half of its A and B bases are the point at infinity) and a witness."""
    if r1cs is None:
        r1cs, w = synthetic_circuit(curve, 300, n_public=3, seed=11)
    pk, _ = setup(r1cs, seed="zkey-prover")
    write_zkey(tmp_path / "c.zkey", pk)
    assert w is not None, "a caller's circuit comes with its witness"
    write_wtns(tmp_path / "w.wtns", curve, w)
    return tmp_path / "c.zkey", tmp_path / "w.wtns"


def engine_proof(zkey: Path, wtns: Path) -> groth16.Proof:
    pk = read_zkey(zkey)
    return groth16.prove(pk, groth16.assignment_from_witness(pk, read_wtns(wtns)), r=R, s=S)


def from_files(zkey: Path, wtns: Path, **kw: int) -> groth16.Proof:
    inputs = zkey_prover.read_inputs(zkey, wtns)
    return zkey_prover.proof_of(inputs, zkey_prover.prove(inputs, r=R, s=S, **kw))


@pytest.mark.parametrize("curve", CURVES)
def test_a_snarkjs_key_proves_as_the_engine_proves_it(curve: str) -> None:
    assert from_files(*snarkjs_fixture(curve)) == engine_proof(*snarkjs_fixture(curve))


@pytest.mark.parametrize("curve", CURVES)
def test_our_key_with_bases_at_infinity_proves_as_the_engine_proves_it(curve: str, tmp_path: Path) -> None:
    files = our_circuit(curve, tmp_path)
    assert from_files(*files) == engine_proof(*files)


@pytest.mark.parametrize("curve", CURVES)
def test_a_proof_from_files_passes_the_independent_verifier(curve: str, tmp_path: Path) -> None:
    zkey, wtns = our_circuit(curve, tmp_path)
    inputs = zkey_prover.read_inputs(zkey, wtns)
    raw = zkey_prover.prove(inputs)
    assert zkey_prover.verify(inputs, raw)
    assert reference_verify(read_zkey(zkey).vk, zkey_prover.proof_of(inputs, raw), inputs.public_inputs)


def test_a_mapped_key_runs_the_engines_split_start_and_finish(tmp_path: Path) -> None:
    # the very start/finish the engine drives, over the mapped file: start queues H and the five
    # MSMs, finish runs them on one thread team
    files = our_circuit("bn128", tmp_path)
    inputs = zkey_prover.read_inputs(*files)
    pending = groth16.start(zkey_prover.mapped_key(inputs), zkey_prover.ZkeyStatement(inputs, 2), CpuBackend(2),
                            r=R, s=S)
    assert pending.abc_released and set(pending.parts) == {"a", "b1", "c", "h", "b2"}
    assert zkey_prover.proof_of(inputs, groth16.finish(pending)) == engine_proof(*files)


@pytest.mark.parametrize("stop_after", [0, 3])
def test_an_abort_stops_a_proof_from_files_between_its_phases(stop_after: int, tmp_path: Path) -> None:
    inputs = zkey_prover.read_inputs(*our_circuit("bn128", tmp_path))
    polls: list[int] = []

    def abort() -> bool:
        polls.append(1)
        return len(polls) > stop_after

    with pytest.raises(ProofAborted, match="abandoned before"):
        groth16.start(zkey_prover.mapped_key(inputs), zkey_prover.ZkeyStatement(inputs, 2), CpuBackend(2), abort=abort)
    assert len(polls) == stop_after + 1


def test_the_thread_count_changes_nothing_but_the_time(tmp_path: Path) -> None:
    """One thread, a few (H among the MSMs' tasks), many (H first, with every thread)."""
    files = our_circuit("bn128", tmp_path)
    proofs = {threads: from_files(*files, threads=threads) for threads in (1, 2, 3, 6)}
    assert len(set(proofs.values())) == 1


def test_a_circuit_without_private_signals_proves(tmp_path: Path) -> None:
    """x·x = y with x and y public: the C MSM has no bases at all."""
    curve = "bn128"
    one = lambda rows: np.ones((rows, 1), np.uint64) * np.array([1, 0, 0, 0], np.uint64)  # noqa: E731
    a = SparseMatrix(row_ptr=np.array([0, 1]), cols=np.array([1]), coeffs=one(1))
    c = SparseMatrix(row_ptr=np.array([0, 1]), cols=np.array([2]), coeffs=one(1))
    r1cs = R1CS(curve=curve, n_vars=3, n_public=2, a=a, b=a, c=c)
    w = np.array([[1, 0, 0, 0], [7, 0, 0, 0], [49, 0, 0, 0]], np.uint64)
    zkey, wtns = our_circuit(curve, tmp_path, r1cs, w)
    inputs = zkey_prover.read_inputs(zkey, wtns)
    assert inputs.public_inputs == [7, 49]
    assert zkey_prover.verify(inputs, zkey_prover.prove(inputs))
    assert from_files(zkey, wtns) == engine_proof(zkey, wtns)


def test_a_witness_that_does_not_satisfy_the_circuit_gives_a_proof_that_fails(tmp_path: Path) -> None:
    zkey, wtns = snarkjs_fixture("bls12381")
    w = read_wtns(wtns)
    w[150, 0] ^= 1
    write_wtns(tmp_path / "bad.wtns", "bls12381", w)
    inputs = zkey_prover.read_inputs(zkey, tmp_path / "bad.wtns")
    assert not zkey_prover.verify(inputs, zkey_prover.prove(inputs))


# ---------------------------------------------------------------------------------------------
# bad files: refused, naming what is wrong


def rewritten_witness(tmp_path: Path, curve: str, edit) -> Path:
    w = read_wtns(snarkjs_fixture(curve)[1])
    edit(w)
    write_wtns(tmp_path / "edited.wtns", curve, w)
    return tmp_path / "edited.wtns"


def test_a_witness_value_not_below_r_is_named(tmp_path: Path) -> None:
    def above_r(w: np.ndarray) -> None:
        w[5] = np.frombuffer(get_curve("bn128").r.to_bytes(32, "little"), "<u8")

    inputs = zkey_prover.read_inputs(snarkjs_fixture("bn128")[0], rewritten_witness(tmp_path, "bn128", above_r))
    with pytest.raises(FormatError, match="the witness: value 5 is not reduced below the field prime"):
        zkey_prover.prove(inputs)


def test_a_witness_not_starting_with_one_is_refused(tmp_path: Path) -> None:
    def zero_first(w: np.ndarray) -> None:
        w[0] = 0

    inputs = zkey_prover.read_inputs(snarkjs_fixture("bn128")[0], rewritten_witness(tmp_path, "bn128", zero_first))
    with pytest.raises(FormatError, match=r"witness\[0\] must be 1"):
        zkey_prover.prove(inputs)


def test_a_witness_for_another_key_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="the witness is over bn128, the proving key over bls12381"):
        zkey_prover.read_inputs(snarkjs_fixture("bls12381")[0], snarkjs_fixture("bn128")[1])
    write_wtns(tmp_path / "short.wtns", "bn128", read_wtns(snarkjs_fixture("bn128")[1])[:-1])
    with pytest.raises(ValueError, match=r"the witness has \d+ values, the proving key expects \d+"):
        zkey_prover.read_inputs(snarkjs_fixture("bn128")[0], tmp_path / "short.wtns")


def edited_zkey(tmp_path: Path, sid: int, offset: int, data: bytes) -> Path:
    """The bn128 fixture's zkey with ``data`` written at ``offset`` into section ``sid``."""
    raw = bytearray(snarkjs_fixture("bn128")[0].read_bytes())
    with open(snarkjs_fixture("bn128")[0], "rb") as fh:
        start, _ = section_table(fh, len(raw), b"zkey")[sid]
    raw[start + offset : start + offset + len(data)] = data
    (tmp_path / "edited.zkey").write_bytes(bytes(raw))
    return tmp_path / "edited.zkey"


ENTRY = 44  # section 4: u32 count, then entries of u32 matrix, row, signal and a 32-byte value


@pytest.mark.parametrize(("field", "value"), [
    (0, struct.pack("<I", 2)),             # a third matrix
    (4, struct.pack("<I", 1 << 20)),       # a row past the domain
    (8, struct.pack("<I", 1 << 20)),       # a signal past the witness
    (12, get_curve("bn128").r.to_bytes(32, "little")),  # a value not below r
])
def test_a_bad_coefficient_entry_is_named(field: int, value: bytes, tmp_path: Path) -> None:
    zkey = edited_zkey(tmp_path, 4, 4 + 3 * ENTRY + field, value)
    inputs = zkey_prover.read_inputs(zkey, snarkjs_fixture("bn128")[1])
    with pytest.raises(FormatError, match="the proving key: coefficient entry 3 is out of range or not reduced"):
        zkey_prover.prove(inputs)


def test_a_verifying_key_point_off_its_curve_is_named(tmp_path: Path) -> None:
    # section 2: n8q, q, n8r, r, three counts, then alpha1 beta1 beta2 gamma2 delta1 delta2
    points, g1, g2 = 4 + 32 + 4 + 32 + 12, 64, 128
    zkey = edited_zkey(tmp_path, 2, points + 2 * g1 + g2 + 8, b"\x01")  # a byte of gamma2's x
    inputs = zkey_prover.read_inputs(zkey, snarkjs_fixture("bn128")[1])
    with pytest.raises(InvalidProof, match="vk gamma2: not on the BN254 G2 curve"):
        zkey_prover.verify(inputs, zkey_prover.prove(inputs))


def test_a_truncated_zkey_is_refused_before_its_sections_are_read(tmp_path: Path) -> None:
    raw = snarkjs_fixture("bn128")[0].read_bytes()
    (tmp_path / "cut.zkey").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(FormatError, match="cut.zkey: is truncated or corrupt"):
        zkey_prover.read_inputs(tmp_path / "cut.zkey", snarkjs_fixture("bn128")[1])
