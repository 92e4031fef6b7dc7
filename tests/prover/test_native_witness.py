"""The witness-program kernel (kernels/witness_cpu.h) against the program run on Python ints:
random programs of inputs, input bits, solving rows and checking rows, on both scalar fields,
their coefficients given as a table of the distinct ones and an index per entry.
The witness and every row's A·w, B·w, C·w come out exactly, and a check names the first
checking row that fails, as a check over the whole assignment would."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prover.backends.cpu import native
from engine.prover.params.curves import CURVES, limbs_to_ints

LC = dict[int, int]


@dataclass
class Program:
    """A program and, beside it, its values as Python ints."""

    p: int
    slots: list[int]
    w: list[int] = field(default_factory=lambda: [1])
    rows: list[tuple[LC, LC, LC]] = field(default_factory=list)
    solves: list[int] = field(default_factory=list)
    b_src: list[int] = field(default_factory=list)
    ops: list[tuple[int, int, int, int]] = field(default_factory=list)

    def value(self, lc: LC) -> int:
        return sum(k * self.w[v] for v, k in lc.items()) % self.p

    def input(self, slot: int, bit: int) -> None:
        raw = self.slots[slot]
        self.ops.append((len(self.rows), len(self.w), slot, bit))
        self.w.append(raw % self.p if bit < 0 else (raw >> bit) & 1)

    def row(self, a: LC, b: LC, c: LC | None, src: int = -1) -> None:
        """A solving row when c is None (its C is the new variable a·b), else a checking one;
        src: the row whose A this row's B is, read from it by the kernel."""
        solves = c is None
        if c is None:
            c = {len(self.w): 1}
            self.w.append(self.value(a) * self.value(b) % self.p)
        self.rows.append((a, b, c))
        self.solves.append(int(solves))
        self.b_src.append(src)

    def table(self) -> list[int]:
        """The distinct coefficients, 1 first."""
        seen = {1: None} | {k: None for r in self.rows for lc in r for k in lc.values()}
        return list(seen)

    def csr(self, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Matrix m as row pointers, columns and each entry's index in table()."""
        index = {k: i for i, k in enumerate(self.table())}
        entries = [sorted(r[m].items()) for r in self.rows]
        ptr = np.zeros(len(entries) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in entries], out=ptr[1:])
        cols = np.array([v for e in entries for v, _ in e], dtype=np.int64)
        return ptr, cols, np.array([index[k] for e in entries for _, k in e], dtype=np.uint32)


def _limbs(values: list[int]) -> np.ndarray:
    raw = b"".join(v.to_bytes(32, "little") for v in values)
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 4).astype(np.uint64)


def random_program(seed: int, p: int) -> Program:
    rng = random.Random(seed)
    edge = [0, 1, p - 1, p, 2**256 - 1, (1 << 255) + 12345]
    prog = Program(p=p, slots=[rng.choice([*edge, rng.randrange(2**256)]) for _ in range(rng.randrange(1, 6))])

    def lc() -> LC:
        return {rng.randrange(len(prog.w)): rng.choice([1, 1, p - 1, rng.randrange(p)]) for _ in range(rng.randrange(1, 5))}

    for _ in range(rng.randrange(1, 40)):
        kind = rng.randrange(6)
        if kind == 0:
            prog.input(rng.randrange(len(prog.slots)), -1)
        elif kind == 1:
            prog.input(rng.randrange(len(prog.slots)), rng.choice([0, 1, 63, 64, 254, 255, rng.randrange(256)]))
        elif kind == 2 and prog.rows:  # B the A of one of the last rows, read from it
            back = rng.randrange(max(0, len(prog.rows) - 3), len(prog.rows))
            prog.row(lc(), dict(prog.rows[back][0]), None, back)
        elif kind == 3:  # B this row's own A
            a = lc()
            prog.row(a, dict(a), None, len(prog.rows))
        elif kind == 4:  # a checking row, often satisfied
            a, b = lc(), lc()
            v = prog.value(a) * prog.value(b) % p
            c = {0: v} if rng.random() < 0.7 else lc()
            prog.row(a, b, c)
        else:
            prog.row(lc(), lc(), None)
    return prog


def run(curve: str, prog: Program, check: bool) -> tuple[np.ndarray, list[np.ndarray], int | None]:
    rows = len(prog.rows)
    w = np.zeros((len(prog.w), 4), np.uint64)
    abc = [np.zeros((rows, 4), np.uint64) for _ in range(3)]
    ops = np.array(prog.ops, dtype=np.int64).reshape(-1, 4)
    bad = native.run_witness_program(curve, _limbs(prog.table()), tuple(prog.csr(m) for m in range(3)), ops,
                                     np.array(prog.solves, np.uint8), np.array(prog.b_src, np.int64),
                                     _limbs(prog.slots), w, *abc, check=check)
    return w, abc, bad


@settings(max_examples=60, deadline=None)
@given(curve=st.sampled_from(sorted(CURVES)), seed=st.integers(0, 2**32), check=st.booleans())
def test_the_kernel_computes_the_programs_witness_and_rows(curve: str, seed: int, check: bool) -> None:
    prog = random_program(seed, CURVES[curve].r)
    w, (a, b, c), bad = run(curve, prog, check)
    assert limbs_to_ints(w) == prog.w
    for m, got in enumerate((a, b, c)):
        assert limbs_to_ints(got) == [prog.value(r[m]) for r in prog.rows]
    failing = [i for i, (ra, rb, rc) in enumerate(prog.rows)
               if prog.value(ra) * prog.value(rb) % prog.p != prog.value(rc)]
    assert bad == (failing[0] if check and failing else None)


def test_a_solving_row_holds_by_construction_so_only_checking_rows_can_fail() -> None:
    p = CURVES["bls12381"].r
    prog = Program(p=p, slots=[3])
    prog.input(0, -1)
    prog.row({1: 1}, {1: 1}, None)  # w2 = 9
    prog.row({1: 1}, {0: 1}, {2: 1})  # 3 · 1 = 9: fails
    prog.row({2: 1}, {0: 1}, {2: 1})  # holds
    assert run("bls12381", prog, check=True)[2] == 1
    assert run("bls12381", prog, check=False)[2] is None


def test_arrays_of_the_wrong_shape_are_refused() -> None:
    p = CURVES["bn128"].r
    prog = Program(p=p, slots=[5])
    prog.input(0, -1)
    prog.row({1: 1}, {1: 1}, None)
    program = (_limbs(prog.table()), tuple(prog.csr(m) for m in range(3)), np.array(prog.ops, dtype=np.int64),
               np.ones(1, np.uint8), np.full(1, -1), _limbs([5]))
    ok = [np.zeros((1, 4), np.uint64) for _ in range(3)]
    with pytest.raises(ValueError, match="a: expected"):
        native.run_witness_program("bn128", *program, np.zeros((3, 4), np.uint64), np.zeros((2, 4), np.uint64),
                                   *ok[1:], check=True)
    with pytest.raises(ValueError, match="witness: expected a writeable"):
        readonly = np.zeros((3, 4), np.uint64)
        readonly.flags.writeable = False
        native.run_witness_program("bn128", *program, readonly, *ok, check=True)
