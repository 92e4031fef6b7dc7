"""Small gadgets: booleans, bit decomposition packed to a public number, conditional swap."""

from __future__ import annotations

from engine.circuits.cs import ConstraintSystem


def alloc_bits[Term](cs: ConstraintSystem[Term], value: int, n_bits: int) -> list[Term]:
    """Allocate the n_bits little-endian bits of value, each constrained b·b = b."""
    bits: list[Term] = []
    for i in range(n_bits):
        b = cs.alloc_bit(value, i)
        cs.enforce(b, b, b)
        bits.append(b)
    return bits


def enforce_packing[Term](cs: ConstraintSystem[Term], bits: list[Term], packed: Term) -> None:
    """sum(2^i · bit_i) = packed: ties the position bits to the public challenge index."""
    cs.enforce_equal(cs.lin((1 << i, b) for i, b in enumerate(bits)), packed)


def conditional_swap[Term](cs: ConstraintSystem[Term], bit: Term, x: Term, y: Term) -> tuple[Term, Term]:
    """(x, y) when bit = 0, (y, x) when bit = 1, with one constraint: d = bit·(y − x)."""
    d = cs.mul(bit, cs.sub(y, x))
    return cs.add(x, d), cs.sub(y, d)
