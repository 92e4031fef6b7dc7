"""The GLV endomorphisms of G1 and G2 for the CPU MSM (kernels/curve_glv.h), derived, not typed.

Both curves and their G2 twists have j-invariant 0, so phi(x, y) = (beta x, y), with beta a
cube root of unity in Fp, maps G1 and G2 each to itself as multiplication by a cube root of
unity lambda mod r (Gallant, Lambert, Vanstone 2001; on G2 the coordinates are in Fp2 and
beta scales both of their coefficients). A 254-bit scalar k splits as k1 + k2 lambda with
|k1|, |k2| about sqrt(r): an MSM over n points and 256-bit scalars becomes one over 2n points
(P and phi(P)) and 128-bit scalars, with the same bucket additions but half the windows, so
half the bucket reductions and doublings. The two groups may take the two different cube
roots, so each has its own lambda and lattice.

The split is Babai rounding in a short basis (a1, b1), (a2, b2) of the lattice
{(a, b): a + b lambda = 0 mod r}, found by the extended Euclidean algorithm on (r, lambda):
c1 = round(b2 k / det), c2 = round(-b1 k / det), k1 = k - c1 a1 - c2 a2, k2 = -c1 b1 - c2 b2,
with det = a1 b2 - a2 b1 = +-r. The kernels approximate each c by (k g + 2^255) >> 256 with
g = round(2^256 b / det); being off by one keeps |k1| <= |a1| + |a2| and |k2| <= |b1| + |b2|.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from engine.prover.params.curves import CURVES, CurveParams
from engine.prover.params.pairing_params import g1_mul, g2_mul

SHIFT = 256  # c = (k g + 2^(SHIFT-1)) >> SHIFT


@dataclass(frozen=True)
class GlvParams:
    beta: int  # phi(x, y) = (beta x, y)
    lam: int  # phi(P) = lam P on G1
    v1: tuple[int, int]  # short lattice vectors (a, b), a + b lam = 0 mod r
    v2: tuple[int, int]
    g1: int  # round(2^SHIFT b2 / det)
    g2: int  # round(-2^SHIFT b1 / det)
    bits: int  # |k1|, |k2| < 2^bits

    def split(self, k: int) -> tuple[int, int]:
        """(k1, k2) with k1 + k2 lam = k mod r, as the kernels compute them."""
        c1 = _round_shift(k * abs(self.g1)) * (1 if self.g1 >= 0 else -1)
        c2 = _round_shift(k * abs(self.g2)) * (1 if self.g2 >= 0 else -1)
        (a1, b1), (a2, b2) = self.v1, self.v2
        return k - c1 * a1 - c2 * a2, -c1 * b1 - c2 * b2


def _round_shift(x: int) -> int:
    return (x + (1 << (SHIFT - 1))) >> SHIFT


def _cube_root_of_unity(m: int) -> int:
    g = 2
    while pow(g, (m - 1) // 3, m) == 1:
        g += 1
    return pow(g, (m - 1) // 3, m)


def short_basis(r: int, lam: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """GLV's two short vectors: the remainders of Euclid on (r, lam) around sqrt(r)."""
    rs, ts = [r, lam], [0, 1]  # rs[i] = s_i r + t_i lam, so (rs[i], -ts[i]) is in the lattice
    while rs[-1] >= math.isqrt(r):
        q = rs[-2] // rs[-1]
        rs.append(rs[-2] - q * rs[-1])
        ts.append(ts[-2] - q * ts[-1])
    last = len(rs) - 1  # the first remainder below sqrt(r)
    v1 = (rs[last], -ts[last])
    q = rs[last - 1] // rs[last]
    after = (rs[last - 1] - q * rs[last], -(ts[last - 1] - q * ts[last]))
    v2 = min(((rs[last - 1], -ts[last - 1]), after), key=lambda v: v[0] ** 2 + v[1] ** 2)
    return v1, v2


GROUPS = ("g1", "g2")


def _phi_multiplies(c: CurveParams, group: str, beta: int, lam: int) -> bool:
    """phi(G) = lam G on the group's generator (and so on the whole cyclic group)."""
    if group == "g1":
        return g1_mul(c, c.g1, lam) == (beta * c.g1[0] % c.p, c.g1[1])
    (x0, x1), y = c.g2
    return g2_mul(c, c.g2, lam) == ((beta * x0 % c.p, beta * x1 % c.p), y)


@functools.cache
def glv_params(curve: str, group: str = "g1") -> GlvParams:
    if group not in GROUPS:
        raise ValueError(f"group: expected g1 or g2, got {group!r}")
    c = CURVES[curve]
    beta, lam0 = _cube_root_of_unity(c.p), _cube_root_of_unity(c.r)
    # the other cube root of unity mod r is lam0^2: the one phi multiplies this group by
    lam = next((lam for lam in (lam0, lam0 * lam0 % c.r) if _phi_multiplies(c, group, beta, lam)), None)
    if lam is None:
        raise ValueError(f"{curve}: phi is not a multiplication on {group.upper()}")
    v1, v2 = short_basis(c.r, lam)
    (a1, b1), (a2, b2) = v1, v2
    det = a1 * b2 - a2 * b1
    if abs(det) != c.r or (a1 + b1 * lam) % c.r or (a2 + b2 * lam) % c.r:
        raise ValueError(f"{curve} {group}: the GLV basis is not a basis of the lattice")
    g1 = ((b2 << SHIFT) + det // 2) // det
    g2 = ((-b1 << SHIFT) + det // 2) // det
    bits = max(abs(a1) + abs(a2), abs(b1) + abs(b2)).bit_length()
    return GlvParams(beta=beta, lam=lam, v1=v1, v2=v2, g1=g1, g2=g2, bits=bits)


def _limbs(v: int, n: int) -> str:
    return "{" + ", ".join(f"0x{(v >> (64 * i)) & (2**64 - 1):016x}ULL" for i in range(n)) + "}"


def _signed(v: int, n: int) -> str:
    """A signed constant as curve_glv.h's {magnitude limbs, negative}."""
    return "{" + _limbs(abs(v), n) + f", {int(v < 0)}" + "}"


def _prelude_lines(c: CurveParams, group: str, gp: GlvParams) -> list[str]:
    tag = f"PS_GLV_{c.name}_{group}"  # each_group.h derives it: PS_GLV_ then the group's prefix
    for v in (gp.g1, gp.g2):
        if abs(v) >> 192:
            raise ValueError(f"{c.name}: GLV rounding constant wider than curve_glv.h's 3 limbs")
    for v in (*gp.v1, *gp.v2):
        if abs(v) >> 128:
            raise ValueError(f"{c.name}: GLV basis wider than curve_glv.h's 2 limbs")
    (a1, b1), (a2, b2) = gp.v1, gp.v2
    beta = _limbs(gp.beta * c.fp_r % c.p, c.fp_limbs)
    return [
        f"#define {tag}_BETA {beta}",  # in Fp, also for G2: it scales both Fp2 coefficients
        f"#define {tag}_LATTICE {{{_signed(gp.g1, 3)}, {_signed(gp.g2, 3)}, {_signed(a1, 2)}, {_signed(b1, 2)}, "
        f"{_signed(a2, 2)}, {_signed(b2, 2)}}}",
    ]


@functools.cache
def glv_prelude() -> str:
    """C #defines for curve_glv.h: per curve and group, beta (Montgomery) and the lattice."""
    lines = ["/* generated by engine/prover/params/glv_params.py */"]
    for name, c in CURVES.items():
        for group in GROUPS:
            lines += _prelude_lines(c, group, glv_params(name, group))
    return "\n".join(lines) + "\n"
