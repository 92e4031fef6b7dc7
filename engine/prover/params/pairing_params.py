"""The parameters of the optimal ate pairings (kernels/pairing.h), derived, not typed.

The C code is a template; everything curve-specific it needs (the Miller loop's digits, the
Frobenius constants, the hard part of the final exponentiation in base p and as a polynomial
in u, the endomorphisms of the subgroup checks) is derived here from the curve's parameter u
and curves.py and emitted as a C prelude, so no magic number is typed twice. Points are Python ints, affine, None for infinity.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from engine.prover.params.curves import CURVES, CurveParams

Fp12Ints = tuple[int, ...]


@dataclass(frozen=True)
class PairingParams:
    u: int  # the family parameter: p, r and the Miller loop are polynomials in it
    xi0: int  # the sextic non-residue xi = xi0 + u of Fp2 (w^6 = xi)
    bn: bool  # a BN curve (loop 6u + 2, D-type twist) rather than BLS12 (loop |u|, M-type)


PAIRING_PARAMS: dict[str, PairingParams] = {
    "bn128": PairingParams(u=4965661367192848881, xi0=9, bn=True),
    "bls12381": PairingParams(u=-0xD201000000010000, xi0=1, bn=False),
}


# ---------------------------------------------------------------------------------------------
# the C prelude


def _fp2_mul(a: tuple[int, int], b: tuple[int, int], p: int) -> tuple[int, int]:
    return ((a[0] * b[0] - a[1] * b[1]) % p, (a[0] * b[1] + a[1] * b[0]) % p)


def _fp2_pow(a: tuple[int, int], e: int, p: int) -> tuple[int, int]:
    acc, base = (1, 0), a
    while e:
        if e & 1:
            acc = _fp2_mul(acc, base, p)
        base = _fp2_mul(base, base, p)
        e >>= 1
    return acc


def _fp2_inv(a: tuple[int, int], p: int) -> tuple[int, int]:
    n = pow(a[0] * a[0] + a[1] * a[1], -1, p)
    return (a[0] * n % p, -a[1] * n % p)


Fp2Int = tuple[int, int]


@dataclass(frozen=True)
class _AffineField:
    """Fp (ints) or Fp2 (pairs) for the prelude-time affine arithmetic below."""

    p: int
    ext: bool

    def mul(self, a: Any, b: Any) -> Any:
        return _fp2_mul(a, b, self.p) if self.ext else a * b % self.p

    def inv(self, a: Any) -> Any:
        return _fp2_inv(a, self.p) if self.ext else pow(a, -1, self.p)

    def lin(self, a: Any, ka: int, b: Any, kb: int) -> Any:
        """ka a + kb b."""
        if self.ext:
            return ((ka * a[0] + kb * b[0]) % self.p, (ka * a[1] + kb * b[1]) % self.p)
        return (ka * a + kb * b) % self.p

    def is_zero(self, a: Any) -> bool:
        return a == (0, 0) if self.ext else a % self.p == 0


def _affine_mul(f: _AffineField, pt: Any, k: int) -> Any:
    """k pt on a short Weierstrass curve y^2 = x^3 + b over f by affine double-and-add."""

    def add(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return a or b
        if a[0] == b[0] and f.is_zero(f.lin(a[1], 1, b[1], 1)):
            return None
        if a == b:
            lam = f.mul(f.lin(f.mul(a[0], a[0]), 3, a[0], 0), f.inv(f.lin(a[1], 2, a[1], 0)))
        else:
            lam = f.mul(f.lin(b[1], 1, a[1], -1), f.inv(f.lin(b[0], 1, a[0], -1)))
        x = f.lin(f.lin(f.mul(lam, lam), 1, a[0], -1), 1, b[0], -1)
        return (x, f.lin(f.mul(lam, f.lin(a[0], 1, x, -1)), 1, a[1], -1))

    acc = None
    for bit in bin(k)[2:]:
        acc = add(acc, acc)
        if bit == "1":
            acc = add(acc, pt)
    return acc


def g1_mul(c: CurveParams, pt: tuple[int, int] | None, k: int) -> tuple[int, int] | None:
    """k pt on G1 by affine double-and-add (prelude-time only)."""
    return _affine_mul(_AffineField(c.p, ext=False), pt, k)


def g2_mul(c: CurveParams, pt: tuple[Fp2Int, Fp2Int] | None, k: int) -> tuple[Fp2Int, Fp2Int] | None:
    """k pt on the G2 twist by affine double-and-add (prelude-time only)."""
    return _affine_mul(_AffineField(c.p, ext=True), pt, k)


def g1_endomorphism_beta(curve: str) -> int:
    """For BLS12: the cube root of unity beta with phi(x, y) = (beta x, y) acting on G1 as
    -u^2 (Bowe, "Faster subgroup checks for BLS12-381", 2019: P is in G1 iff phi(P) = -[u^2]P)."""
    c, u = CURVES[curve], PAIRING_PARAMS[curve].u
    k = g1_mul(c, c.g1, u * u)
    assert k is not None
    target = (k[0], -k[1] % c.p)
    g = 2
    while True:  # a primitive cube root of unity: g^((p-1)/3) != 1
        beta = pow(g, (c.p - 1) // 3, c.p)
        if beta != 1:
            break
        g += 1
    for b in (beta, beta * beta % c.p):
        if (b * c.g1[0] % c.p, c.g1[1]) == target:
            return b
    raise ValueError(f"{curve}: no cube root of unity acts on G1 as -u^2")


def naf(n: int) -> list[int]:
    """Non-adjacent form of n > 0, most significant digit first (fewest additions)."""
    out: list[int] = []
    while n:
        d = (2 - n % 4) if n % 2 else 0
        out.append(d)
        n = (n - d) // 2
    return out[::-1]


def miller_digits(curve: str) -> list[int]:
    pp = PAIRING_PARAMS[curve]
    return naf(6 * pp.u + 2 if pp.bn else abs(pp.u))


def hard_digits(c: CurveParams) -> list[int]:
    """(p^4 - p^2 + 1)/r in base p, least significant first."""
    d, rem = divmod(c.p**4 - c.p**2 + 1, c.r)
    if rem:
        raise ValueError(f"{c.name}: r does not divide p^4 - p^2 + 1")
    out = []
    for _ in range(4):
        d, digit = divmod(d, c.p)
        out.append(digit)
    return out


Poly = dict[tuple[int, int], int]  # {(power of p, power of u): coefficient}


def _poly_mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for (i, k), x in a.items():
        for (j, m), y in b.items():
            out[(i + j, k + m)] = out.get((i + j, k + m), 0) + x * y
    return {key: v for key, v in out.items() if v}


def hard_part_poly(curve: str) -> tuple[int, Poly]:
    """(m, P) with P(p, u) = m (p^4 - p^2 + 1)/r and gcd(m, r) = 1: the fast hard part computes
    f^P from f^(u^k) and Frobenius maps, so a pairing check sees e^m, which is 1 iff e is.

    BN: the exact base-p digits as polynomials in u of Scott et al., "On the final
    exponentiation for calculating pairings on ordinary elliptic curves" (2009), m = 1.
    BLS12: 3 (p^4 - p^2 + 1)/r = (u - 1)^2 (u + p)(u^2 + p^2 - 1) + 3 of Hayashida, Hayasaka
    and Teruya (2020), m = 3.
    """
    c, pp = CURVES[curve], PAIRING_PARAMS[curve]
    if pp.bn:
        m, poly = 1, {(0, 3): -36, (0, 2): -30, (0, 1): -18, (0, 0): -2}
        poly.update({(1, 3): -36, (1, 2): -18, (1, 1): -12, (1, 0): 1, (2, 2): 6, (2, 0): 1, (3, 0): 1})
    else:
        um1: Poly = {(0, 1): 1, (0, 0): -1}
        poly = _poly_mul(_poly_mul(um1, um1), {(0, 1): 1, (1, 0): 1})
        poly = _poly_mul(poly, {(0, 2): 1, (2, 0): 1, (0, 0): -1})
        poly[(0, 0)] = poly.get((0, 0), 0) + 3
        m = 3
    value = sum(v * c.p**i * pp.u**k for (i, k), v in poly.items())
    if value != m * ((c.p**4 - c.p**2 + 1) // c.r) or math.gcd(m, c.r) != 1:
        raise ValueError(f"{curve}: the hard-part polynomial does not match the curve")
    return m, poly


def frobenius_gammas(c: CurveParams, xi: tuple[int, int]) -> dict[int, list[tuple[int, int]]]:
    """gamma[j][k] = xi^(k (p^j - 1)/6) for j = 1..3, k = 0..5, from the one power
    g = xi^((p - 1)/6): since h^p = conj(h) on Fp2, xi^((p^2 - 1)/6) = g^(p + 1) = g conj(g)
    and xi^((p^3 - 1)/6) = g^(p^2 + p + 1) = g conj(g) g."""
    g = _fp2_pow(xi, (c.p - 1) // 6, c.p)
    g2 = _fp2_mul(g, (g[0], -g[1] % c.p), c.p)
    firsts = {1: g, 2: g2, 3: _fp2_mul(g2, g, c.p)}
    out: dict[int, list[tuple[int, int]]] = {}
    for j, h in firsts.items():
        powers = [(1, 0)]
        for _ in range(5):
            powers.append(_fp2_mul(powers[-1], h, c.p))
        out[j] = powers
    return out


def _limbs(v: int, n: int) -> str:
    return "{" + ", ".join(f"0x{(v >> (64 * i)) & (2**64 - 1):016x}ULL" for i in range(n)) + "}"


def _mont(v: int, c: CurveParams) -> int:
    return v * c.fp_r % c.p


def _fp2_limbs(a: tuple[int, int], c: CurveParams) -> str:
    # one flat initializer of 2 NL limbs (c0 then c1), Montgomery form
    return _limbs(_mont(a[0], c) + (_mont(a[1], c) << (64 * c.fp_limbs)), 2 * c.fp_limbs)


def _check_params(c: CurveParams, pp: PairingParams) -> None:
    u = pp.u
    if pp.bn:
        p = 36 * u**4 + 36 * u**3 + 24 * u**2 + 6 * u + 1
        r = 36 * u**4 + 36 * u**3 + 18 * u**2 + 6 * u + 1
    else:
        r = u**4 - u**2 + 1
        p = (u - 1) ** 2 * r // 3 + u
    if (p, r) != (c.p, c.r):
        raise ValueError(f"{c.name}: pairing parameter u does not match curves.py")


@functools.cache
def pairing_prelude() -> str:
    """C #defines for pairing_instances.h, derived from PAIRING_PARAMS and curves.py."""
    lines = ["/* generated by engine/prover/params/pairing_params.py */"]
    for name, pp in PAIRING_PARAMS.items():
        c = CURVES[name]
        _check_params(c, pp)
        tag = f"PS_{name.upper()}"
        xi = (pp.xi0, 1)
        gam = frobenius_gammas(c, xi)
        frob = ["{" + ", ".join(_fp2_limbs(gam[j][k], c) for k in range(1, 6)) + "}" for j in range(1, 4)]
        digits = miller_digits(name)
        hard = hard_digits(c)
        _, poly = hard_part_poly(name)
        kmax = max(k for _, k in poly)
        coef = [[poly.get((i, k), 0) for k in range(kmax + 1)] for i in range(4)]
        coef_c = "{" + ", ".join("{" + ", ".join(map(str, row)) + "}" for row in coef) + "}"
        u_naf = naf(abs(pp.u))
        # psi = untwist^-1 . Frobenius . untwist on the twist, x -> conj(x) cx, y -> conj(y) cy;
        # on G2 it acts as multiplication by p mod r = 6u^2 (BN) or u (BLS12)
        g12, g13 = gam[1][2], gam[1][3]
        if not pp.bn:  # M-type: the untwist divides by powers of w
            g12, g13 = (_fp2_inv(g, c.p) for g in (g12, g13))
        psi_k = 6 * pp.u**2 if pp.bn else pp.u
        if psi_k % c.r != c.p % c.r:
            raise ValueError(f"{name}: psi's eigenvalue is not p mod r")
        lines += [
            f"#define {tag}_XI0 {pp.xi0}",
            f"#define {tag}_FROB {{{', '.join(frob)}}}",
            f"#define {tag}_LOOP {{{', '.join(map(str, digits))}}}",
            f"#define {tag}_LOOP_LEN {len(digits)}",
            f"#define {tag}_HARD {{{', '.join(_limbs(d, c.fp_limbs) for d in hard)}}}",
            f"#define {tag}_HARD_BITS {max(d.bit_length() for d in hard)}",
            f"#define {tag}_HPOLY {coef_c}",
            f"#define {tag}_HPOLY_K {kmax + 1}",
            f"#define {tag}_HPOLY_BITS {max(abs(v) for v in poly.values()).bit_length()}",
            f"#define {tag}_UNAF {{{', '.join(map(str, u_naf))}}}",
            f"#define {tag}_UNAF_LEN {len(u_naf)}",
            f"#define {tag}_PSI_X {_fp2_limbs(g12, c)}",
            f"#define {tag}_PSI_Y {_fp2_limbs(g13, c)}",
            f"#define {tag}_PSI_K {_limbs(abs(psi_k), 4)}",
            f"#define {tag}_PSI_NEG {int(psi_k < 0)}",
            f"#define {tag}_B {_limbs(_mont(c.b, c), c.fp_limbs)}",
            f"#define {tag}_B2 {_fp2_limbs(c.b2, c)}",
            f"#define {tag}_R {_limbs(c.r, 4)}",
            f"#define {tag}_HALF {_limbs(_mont((c.p + 1) // 2, c), c.fp_limbs)}",
        ]
        if not pp.bn:  # G1 has a cofactor: membership through phi
            lines += [
                f"#define {tag}_G1_BETA {_limbs(_mont(g1_endomorphism_beta(name), c), c.fp_limbs)}",
                f"#define {tag}_G1_K {_limbs(pp.u * pp.u, 4)}",
            ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# the Python API
