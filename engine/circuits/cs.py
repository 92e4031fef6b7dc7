"""A constraint system in the spirit of bellperson, with two modes over one circuit definition.

A circuit is a function ``define(cs, data)`` that allocates variables and states constraints
through the methods below. The same function runs in two modes:

* ``ShapeCS`` records every constraint as sparse linear combinations and compiles them once
  into an ``R1CS`` (CSR matrices): the "pre-compiled circuit", cached per process. It also
  records how every variable gets its value, the circuit's witness program
  (engine.circuits.program): a private made by ``mul`` or ``materialize`` is solved from its
  own row, v = (A·w)(B·w); any other allocation takes a value of the partition's data, which
  the circuit is run on as ``Slot``s (numbered stand-ins for its values) while it is recorded.
* ``WitnessCS`` computes only the values: each term is a plain Python ``int`` mod r, an
  allocation is one list append, ``enforce`` does nothing. No matrix is built, so the
  per-constraint cost is a multiply-mod and an append.

Terms are what gadgets pass around: ``ConstraintSystem[Term]`` is generic over its term type, an
``LC`` (dict var -> coefficient) in shape mode (``ShapeCS``), an ``int`` value in witness mode
(``WitnessCS``). Gadgets are generic over Term and only use the methods here, so they never branch
on mode; a gadget with a native witness computation hands it to ``native``, which runs it in
witness mode only.

Variables follow snarkjs's order: 0 is the constant 1, then the public signals, then the
private ones. While recording, private variable j is numbered -(j+1), so publics may be
allocated at any time; ``ShapeCS.compile`` renumbers privates to n_public + 1 + j.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from engine.circuits.grain import BLS12_381_R as R
from engine.prover.r1cs import R1CS, SparseMatrix

LC = dict[int, int]
# A gadget's native witness computation: (input values, push) -> output value, handing push
# every private value the gadget allocates, in its order.
type NativeGadget = Callable[[Sequence[int], Callable[[int], object]], int]

ONE = 0  # the variable that is always 1


class Slot(int):
    """A stand-in for the value at position ``index`` of a partition's data (kinds.PartitionData's
    ``flat`` order): what ``ShapeCS`` records an allocation of that value by. It is the int 0 to
    anything else, so a circuit that computes with a value before allocating it records no slot,
    and its program is refused (engine.circuits.program)."""

    index: int

    def __new__(cls, index: int) -> Slot:
        slot = super().__new__(cls, 0)
        slot.index = index
        return slot


def ints_to_limbs(values: Sequence[int]) -> np.ndarray:
    """Python ints < 2^256 -> (n, 4) uint64 little-endian limbs (the R1CS boundary format)."""
    if not values:
        return np.zeros((0, 4), dtype=np.uint64)
    raw = b"".join(v.to_bytes(32, "little") for v in values)
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 4).astype(np.uint64)


def limbs_to_ints(limbs: np.ndarray) -> list[int]:
    raw = np.ascontiguousarray(limbs, dtype="<u8").tobytes()
    return [int.from_bytes(raw[i : i + 32], "little") for i in range(0, len(raw), 32)]


class ConstraintSystem[Term]:
    """The interface gadgets see. Subclasses decide what a term is."""

    curve = "bls12381"

    def alloc_public(self, value: int) -> Term:
        raise NotImplementedError

    def alloc(self, value: int) -> Term:
        raise NotImplementedError

    def alloc_bit(self, value: int, i: int) -> Term:
        """A new private variable holding bit i of ``value`` (unconstrained: the caller states
        that it is boolean)."""
        return self.alloc((value >> i) & 1)

    def enforce(self, a: Term, b: Term, c: Term) -> None:
        raise NotImplementedError

    def const(self, k: int) -> Term:
        raise NotImplementedError

    def lin(self, pairs: Iterable[tuple[int, Term]], constant: int = 0) -> Term:
        """sum(k * t) + constant, a linear combination: no constraint, no variable."""
        raise NotImplementedError

    def add(self, a: Term, b: Term) -> Term:
        return self.lin(((1, a), (1, b)))

    def sub(self, a: Term, b: Term) -> Term:
        return self.lin(((1, a), (R - 1, b)))

    def mul(self, a: Term, b: Term) -> Term:
        """A new private variable holding a*b, with the constraint a * b = v."""
        raise NotImplementedError

    def materialize(self, a: Term) -> Term:
        """A new private variable equal to a (a * 1 = v): keeps long linear combinations short."""
        raise NotImplementedError

    def enforce_equal(self, a: Term, b: Term) -> None:
        self.enforce(a, self.const(1), b)

    def native(self, inputs: Sequence[Term], compute: NativeGadget) -> Term | None:
        """A gadget's witness-mode shortcut: in witness mode, ``compute(values, push)`` on the
        inputs' values, allocating what it pushes, and its result as a term; None in shape
        mode, where the gadget then states its constraints through the methods above."""
        return None


class WitnessCS(ConstraintSystem[int]):
    """Values only: terms are ints mod r."""

    def __init__(self) -> None:
        self.public: list[int] = []
        self.private: list[int] = []

    def alloc_public(self, value: int) -> int:
        value %= R
        self.public.append(value)
        return value

    def alloc(self, value: int) -> int:
        value %= R
        self.private.append(value)
        return value

    def enforce(self, a: int, b: int, c: int) -> None:
        return None

    def const(self, k: int) -> int:
        return k % R

    def lin(self, pairs: Iterable[tuple[int, int]], constant: int = 0) -> int:
        total = constant
        for k, t in pairs:
            total += k * t
        return total % R

    def add(self, a: int, b: int) -> int:
        return (a + b) % R

    def sub(self, a: int, b: int) -> int:
        return (a - b) % R

    def mul(self, a: int, b: int) -> int:
        v = a * b % R
        self.private.append(v)
        return v

    def materialize(self, a: int) -> int:
        self.private.append(a)
        return a

    def enforce_equal(self, a: int, b: int) -> None:
        return None

    def native(self, inputs: Sequence[int], compute: NativeGadget) -> int:
        return compute(inputs, self.private.append)

    @property
    def n_vars(self) -> int:
        return 1 + len(self.public) + len(self.private)

    def values(self) -> list[int]:
        """The full witness in snarkjs order: 1, publics, privates."""
        return [1, *self.public, *self.private]

    def witness(self) -> np.ndarray:
        return ints_to_limbs(self.values())


class ShapeCS(ConstraintSystem[LC]):
    """Records constraints as linear combinations; ``compile`` turns them into CSR matrices.

    Beside them, the witness program: ``solves`` says of each row whether it defines its C
    row's variable (``mul``, ``materialize``), and ``inputs`` lists every other allocation as
    (rows recorded before it, variable, data slot or None, bit or -1)."""

    def __init__(self) -> None:
        self.n_public = 0
        self.n_private = 0
        self.rows_a: list[LC] = []
        self.rows_b: list[LC] = []
        self.rows_c: list[LC] = []
        self.solves: list[bool] = []
        self.inputs: list[tuple[int, int, int | None, int]] = []

    def _input(self, var: int, value: int, bit: int) -> LC:
        self.inputs.append((len(self.rows_a), var, value.index if isinstance(value, Slot) else None, bit))
        return {var: 1}

    def _private(self) -> int:
        self.n_private += 1
        return -self.n_private

    def alloc_public(self, value: int) -> LC:
        self.n_public += 1
        return self._input(self.n_public, value, -1)

    def alloc(self, value: int) -> LC:
        return self._input(self._private(), value, -1)

    def alloc_bit(self, value: int, i: int) -> LC:
        return self._input(self._private(), value, i)

    def _row(self, a: LC, b: LC, c: LC, solves: bool) -> None:
        self.rows_a.append(a)
        self.rows_b.append(b)
        self.rows_c.append(c)
        self.solves.append(solves)

    def enforce(self, a: LC, b: LC, c: LC) -> None:
        self._row(a, b, c, False)

    def const(self, k: int) -> LC:
        k %= R
        return {ONE: k} if k else {}

    def lin(self, pairs: Iterable[tuple[int, LC]], constant: int = 0) -> LC:
        out: LC = {ONE: constant % R} if constant % R else {}
        for k, t in pairs:
            for var, coeff in t.items():
                v = (out.get(var, 0) + k * coeff) % R
                if v:
                    out[var] = v
                else:
                    out.pop(var, None)
        return out

    def mul(self, a: LC, b: LC) -> LC:
        v = {self._private(): 1}
        self._row(a, b, v, True)
        return v

    def materialize(self, a: LC) -> LC:
        v = {self._private(): 1}
        self._row(a, {ONE: 1}, v, True)
        return v

    @property
    def n_constraints(self) -> int:
        return len(self.rows_a)

    def compile(self) -> R1CS:
        n_public = self.n_public
        return R1CS(
            curve=self.curve,
            n_vars=1 + n_public + self.n_private,
            n_public=n_public,
            a=_csr(self.rows_a, n_public),
            b=_csr(self.rows_b, n_public),
            c=_csr(self.rows_c, n_public),
        )


def _csr(rows: list[LC], n_public: int) -> SparseMatrix:
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    row_ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=row_ptr[1:])
    # Sorted columns inside a row make the matrices canonical (bit-identical across runs).
    cols_list: list[int] = []
    coeffs_list: list[int] = []
    for r in rows:
        for var in sorted(r, key=lambda v: v if v >= 0 else n_public - v):
            cols_list.append(var)
            coeffs_list.append(r[var])
    cols = np.array(cols_list, dtype=np.int64)
    # Private -(j+1) -> n_public + 1 + j.
    cols = np.where(cols < 0, n_public - cols, cols)
    return SparseMatrix(row_ptr=row_ptr, cols=cols, coeffs=ints_to_limbs(coeffs_list))
