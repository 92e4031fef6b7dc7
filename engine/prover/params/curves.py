"""Curve parameters and conversions between Python ints and the kernels' limb arrays.

Conventions (shared with engine.prover.r1cs and the snarkjs formats):

* Scalars (Fr) cross Python/C as numpy uint64 arrays of shape (n, 4): little-endian 64-bit
  limbs, standard form.
* Points cross as affine coordinates in Montgomery form (x * 2^(64L) mod p), little-endian
  limbs, exactly the zkey layout: G1 = (x, y), G2 = (x.c0, x.c1, y.c0, y.c1). All-zero limbs
  stand for the point at infinity (no affine point has x = y = 0 on y^2 = x^3 + b, b != 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np

G1Affine = tuple[int, int]
Fp2Int = tuple[int, int]
G2Affine = tuple[Fp2Int, Fp2Int]


class CurveParams(NamedTuple):
    """One curve's constants (a named tuple, not a dataclass: the command-line prover imports
    this module, and dataclasses' own import is a tenth of a small proof's time)."""

    name: str
    p: int  # base field modulus
    r: int  # scalar field order (group order of G1/G2)
    fp_limbs: int
    fr_limbs: int
    b: int  # G1: y^2 = x^3 + b
    b2: Fp2Int  # G2 twist: y^2 = x^3 + b2 over Fp2 = Fp[u]/(u^2 + 1)
    g1: G1Affine
    g2: G2Affine
    two_adicity: int  # largest s with 2^s | r - 1
    nqr: int  # snarkjs/ffjavascript: smallest quadratic non-residue of Fr

    @property
    def fp_r(self) -> int:
        """Montgomery radix for Fp."""
        return 1 << (64 * self.fp_limbs)

    @property
    def fr_r(self) -> int:
        return 1 << (64 * self.fr_limbs)


BN128 = CurveParams(
    name="bn128",
    p=21888242871839275222246405745257275088696311157297823662689037894645226208583,
    r=21888242871839275222246405745257275088548364400416034343698204186575808495617,
    fp_limbs=4,
    fr_limbs=4,
    b=3,
    b2=(
        19485874751759354771024239261021720505790618469301721065564631296452457478373,
        266929791119991161246907387137283842545076965332900288569378510910307636690,
    ),
    g1=(1, 2),
    g2=(
        (
            10857046999023057135944570762232829481370756359578518086990519993285655852781,
            11559732032986387107991004021392285783925812861821192530917403151452391805634,
        ),
        (
            8495653923123431417604973247489272438418190587263600148770280649306958101930,
            4082367875863433681332203403145435568316851327593401208105741076214120093531,
        ),
    ),
    two_adicity=28,
    nqr=5,
)

BLS12381 = CurveParams(
    name="bls12381",
    p=int(
        "4002409555221667393417789825735904156556882819939007885332058136124031650490837864442687629129015664037894272559787"
    ),
    r=52435875175126190479447740508185965837690552500527637822603658699938581184513,
    fp_limbs=6,
    fr_limbs=4,
    b=4,
    b2=(4, 4),
    g1=(
        int(
            "3685416753713387016781088315183077757961620795782546409894578378688607592378376318836054947676345821548104185464507"
        ),
        int(
            "1339506544944476473020471379941921221584933875938349620426543736416511423956333506472724655353366534992391756441569"
        ),
    ),
    g2=(
        (
            int(
                "352701069587466618187139116011060144890029952792775240219908644239793785735715026873347600343865175952761926303160"
            ),
            int(
                "3059144344244213709971259814753781636986470325476647558659373206291635324768958432433509563104347017837885763365758"
            ),
        ),
        (
            int(
                "1985150602287291935568054521177171638300868978215655730859378665066344726373823718423869104263333984641494340347905"
            ),
            int(
                "927553665492332455747201965776037880757740193453592970025027978793976877002675564980949289727957565575433344219582"
            ),
        ),
    ),
    two_adicity=32,
    nqr=5,
)

CURVES: dict[str, CurveParams] = {"bls12381": BLS12381, "bn128": BN128}


def get_curve(curve: str | CurveParams) -> CurveParams:
    if isinstance(curve, CurveParams):
        return curve
    try:
        return CURVES[curve]
    except KeyError:
        raise ValueError(f"unknown curve {curve!r}; expected one of {sorted(CURVES)}") from None


def root_of_unity(curve: str | CurveParams, log_n: int) -> int:
    """The 2^log_n-th root of unity snarkjs uses: w[s] = nqr^((r-1)/2^s), w[k] = w[k+1]^2.

    Squaring down from w[s] gives nqr^((r-1)/2^k) again, so compute it directly.
    """
    return _root_of_unity(get_curve(curve).name, log_n)


@lru_cache(maxsize=256)
def _root_of_unity(curve: str, log_n: int) -> int:
    """Remembered: a proof asks for its domain's roots several times, each a 255-bit power."""
    c = get_curve(curve)
    if not 0 <= log_n <= c.two_adicity:
        raise ValueError(f"log_n must be in [0, {c.two_adicity}] for {c.name}")
    return pow(c.nqr, (c.r - 1) >> log_n, c.r)


# numpy is imported by the conversions below, on first use: the constants above are all the
# command-line prover needs, and it starts without the numeric stack.


def _ints_to_limbs(values: Sequence[int], limbs: int) -> np.ndarray:
    import numpy as np

    n = len(values)
    raw = b"".join(int(v).to_bytes(8 * limbs, "little") for v in values)
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(n, limbs)


def fr_to_limbs(values: Sequence[int], curve: str | CurveParams | None = None) -> np.ndarray:
    """Python ints -> (n, 4) uint64 standard form. Values are reduced mod r when a curve is given."""
    if curve is not None:
        r = get_curve(curve).r
        values = [int(v) % r for v in values]
    else:
        for v in values:
            if not 0 <= v < 1 << 256:
                raise ValueError("scalar out of range for 4 limbs")
    return _ints_to_limbs(values, 4)


def fp_to_limbs(values: Sequence[int], curve: str | CurveParams) -> np.ndarray:
    c = get_curve(curve)
    return _ints_to_limbs([int(v) % c.p for v in values], c.fp_limbs)


def limbs_to_ints(arr: np.ndarray) -> list[int]:
    """(n, L) uint64 little-endian limbs -> Python ints (or one int for a 1-D array)."""
    import numpy as np

    a = np.ascontiguousarray(arr, dtype=np.uint64)
    if a.ndim == 1:
        return [int.from_bytes(a.astype("<u8").tobytes(), "little")]
    width = a.shape[1] * 8
    raw = a.astype("<u8").tobytes()
    return [int.from_bytes(raw[i * width : (i + 1) * width], "little") for i in range(a.shape[0])]


def g1_to_mont(points: Sequence[G1Affine | None], curve: str | CurveParams) -> np.ndarray:
    c = get_curve(curve)
    vals: list[int] = []
    for pt in points:
        if pt is None:
            vals += [0, 0]
        else:
            vals += [pt[0] * c.fp_r % c.p, pt[1] * c.fp_r % c.p]
    return _ints_to_limbs(vals, c.fp_limbs).reshape(len(points), 2 * c.fp_limbs)


def coords_from_mont(raw: bytes, c: CurveParams, coords: int) -> list[list[int] | None]:
    """Points of ``coords`` coordinates as little-endian Montgomery bytes -> each point's
    coordinates as ints, standard form (None for all-zero, infinity). No numpy: the command-line
    prover converts its proof with this."""
    n = 8 * c.fp_limbs
    rinv = pow(c.fp_r, -1, c.p)
    vals = [int.from_bytes(raw[i : i + n], "little") for i in range(0, len(raw), n)]
    out: list[list[int] | None] = []
    for i in range(0, len(vals), coords):
        xs = vals[i : i + coords]
        out.append(None if not any(xs) else [v * rinv % c.p for v in xs])
    return out


def _from_mont(arr: np.ndarray | Sequence[np.ndarray], c: CurveParams, coords: int) -> list[list[int] | None]:
    import numpy as np

    a = np.ascontiguousarray(arr, dtype=np.uint64)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    L = c.fp_limbs
    if a.shape[1] != coords * L:
        raise ValueError(f"expected {coords * L} limbs per point, got {a.shape[1]}")
    return coords_from_mont(a.astype("<u8").tobytes(), c, coords)


def g1_from_mont(arr: np.ndarray, curve: str | CurveParams) -> list[G1Affine | None]:
    c = get_curve(curve)
    return [None if v is None else (v[0], v[1]) for v in _from_mont(arr, c, 2)]


def g2_to_mont(points: Sequence[G2Affine | None], curve: str | CurveParams) -> np.ndarray:
    c = get_curve(curve)
    vals: list[int] = []
    for pt in points:
        if pt is None:
            vals += [0, 0, 0, 0]
        else:
            (x0, x1), (y0, y1) = pt
            vals += [v * c.fp_r % c.p for v in (x0, x1, y0, y1)]
    return _ints_to_limbs(vals, c.fp_limbs).reshape(len(points), 4 * c.fp_limbs)


def g2_from_mont(arr: np.ndarray | Sequence[np.ndarray], curve: str | CurveParams) -> list[G2Affine | None]:
    c = get_curve(curve)
    return [None if v is None else ((v[0], v[1]), (v[2], v[3])) for v in _from_mont(arr, c, 4)]
