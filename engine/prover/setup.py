"""Local single-party Groth16 setup: a DEVELOPMENT setup, not a ceremony.

Whoever runs it knows (or could have kept) the toxic waste tau, alpha, beta, delta and could
forge proofs; it is for tests, benchmarks and demos. Production keys come from a multi-party
ceremony (snarkjs powers of tau + zkey contributions). The waste comes from `secrets` and is
dropped when setup returns, unless a seed is given (tests), which makes it reproducible.

The keys have snarkjs's shape, so snarkjs proves with our .zkey: gamma = 1 (gamma2 = the G2
generator), one extra A row per public signal (row n_constraints + i, signal i, coefficient
1), H points for the odd coset that snarkjs's prover evaluates h on. All scalar work is
vectorised over native field kernels; the points come from native fixed-base batches.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time

import numpy as np

from engine.prover.backends.cpu import native
from engine.prover.keys import ProvingKey, VerifyingKey
from engine.prover.params.curves import get_curve, root_of_unity
from engine.prover.r1cs import R1CS, SparseMatrix

log = logging.getLogger(__name__)

DEV_SETUP_NOTICE = (
    "DEVELOPMENT Groth16 setup (single party, toxic waste known to this process): "
    "not a ceremony; do not use its keys where soundness matters"
)


def _const(v: int, n: int, r: int) -> np.ndarray:
    row = np.frombuffer((v % r).to_bytes(32, "little"), dtype="<u8").astype(np.uint64)
    return np.ascontiguousarray(np.broadcast_to(row, (n, 4)))


class _F:
    """Vectorised Fr helpers over the native kernels, for one curve."""

    def __init__(self, curve: str) -> None:
        self.curve = curve
        self.r = get_curve(curve).r

    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return native.fr_mul(self.curve, a, b)

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return native.fr_add(self.curve, a, b)

    def sub(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return native.fr_sub(self.curve, a, b)

    def scale(self, a: np.ndarray, k: int) -> np.ndarray:
        return self.mul(a, _const(k, a.shape[0], self.r))

    def powers(self, g: int, n: int) -> np.ndarray:
        """[1, g, g², …, g^(n−1)] by doubling: log2(n) vector multiplications."""
        out = np.zeros((max(n, 1), 4), np.uint64)
        out[0, 0] = 1
        filled, gk = 1, g % self.r
        while filled < n:
            take = min(filled, n - filled)
            out[filled : filled + take] = self.scale(out[:take], gk)
            filled += take
            gk = gk * gk % self.r
        return out[:n]

    def batch_inv(self, x: np.ndarray) -> np.ndarray:
        """Elementwise inverse by a product tree (2n multiplications, one Python inversion)."""
        n = x.shape[0]
        size = 1 << max(0, (n - 1).bit_length())
        cur = np.zeros((size, 4), np.uint64)
        cur[:, 0] = 1
        cur[:n] = x
        levels = [cur]
        while cur.shape[0] > 1:
            cur = self.mul(np.ascontiguousarray(cur[0::2]), np.ascontiguousarray(cur[1::2]))
            levels.append(cur)
        root = int.from_bytes(cur[0].astype("<u8").tobytes(), "little")
        if root == 0:
            raise ZeroDivisionError("batch_inv: a zero element")
        inv = _const(pow(root, -1, self.r), 1, self.r)
        for lvl in reversed(levels[:-1]):
            nxt = np.empty_like(lvl)
            nxt[0::2] = self.mul(inv, np.ascontiguousarray(lvl[1::2]))
            nxt[1::2] = self.mul(inv, np.ascontiguousarray(lvl[0::2]))
            inv = nxt
        return inv[:n]


def _transpose_matvec(curve: str, m: SparseMatrix, n_cols: int, vec: np.ndarray) -> np.ndarray:
    """out[j] = sum_i m[i, j] · vec[i], through the native CSR mat-vec on the transpose."""
    rows = np.repeat(np.arange(m.rows, dtype=np.int64), np.diff(m.row_ptr))
    order = np.argsort(m.cols, kind="stable")
    counts = np.bincount(m.cols, minlength=n_cols)
    rp = np.zeros(n_cols + 1, dtype=np.int64)
    np.cumsum(counts, out=rp[1:])
    return native.sparse_matvec(curve, rp, rows[order], np.ascontiguousarray(m.coeffs[order]), vec)


def _pad_rows(m: SparseMatrix, n_rows: int) -> SparseMatrix:
    rp = np.concatenate([m.row_ptr, np.full(n_rows - m.rows, m.row_ptr[-1], dtype=np.int64)])
    return SparseMatrix(row_ptr=rp, cols=m.cols.astype(np.int64), coeffs=m.coeffs)


def _a_with_public_rows(r1cs: R1CS, n_rows: int) -> SparseMatrix:
    """A plus snarkjs's rows n_constraints + i: (1 · signal i), i = 0 … n_public."""
    P = r1cs.n_public + 1
    n = r1cs.n_constraints
    nnz = r1cs.a.nnz
    cols = np.concatenate([r1cs.a.cols.astype(np.int64), np.arange(P, dtype=np.int64)])
    one = np.zeros((P, 4), np.uint64)
    one[:, 0] = 1
    coeffs = np.concatenate([r1cs.a.coeffs, one])
    rp = np.empty(n_rows + 1, dtype=np.int64)
    rp[: n + 1] = r1cs.a.row_ptr
    rp[n + 1 : n + 1 + P] = nnz + np.arange(1, P + 1)
    rp[n + 1 + P :] = nnz + P
    return SparseMatrix(row_ptr=rp, cols=cols, coeffs=coeffs)


def _skip_zeros(batch, width: int):
    """Wrap a fixed-base batch so zero scalars (unused signals: infinity) cost nothing."""

    def run(curve: str, scalars: np.ndarray) -> np.ndarray:
        nz = np.any(scalars != 0, axis=1)
        if nz.all():
            return batch(curve, scalars)
        out = np.zeros((scalars.shape[0], width), np.uint64)
        if nz.any():
            out[nz] = batch(curve, np.ascontiguousarray(scalars[nz]))
        return out

    return run


def _toxic(curve: str, seed: bytes | str | int | None) -> dict[str, int]:
    r = get_curve(curve).r
    out: dict[str, int] = {}
    for name in ("tau", "alpha", "beta", "delta"):
        if seed is None:
            out[name] = 1 + secrets.randbelow(r - 1)
        else:
            d = hashlib.sha512(f"provingsite-dev-setup:{seed!r}:{name}".encode()).digest()
            out[name] = 1 + int.from_bytes(d, "little") % (r - 1)
    return out


def setup(r1cs: R1CS, *, seed: bytes | str | int | None = None) -> tuple[ProvingKey, VerifyingKey]:
    """A development Groth16 key pair for r1cs (see the module doc: not a ceremony)."""
    from engine.prover.snarkjs import cs_hash_of

    t0 = time.perf_counter()
    log.warning("%s (circuit: %s, %d constraints)", DEV_SETUP_NOTICE, r1cs.curve, r1cs.n_constraints)
    curve = r1cs.curve
    c = get_curve(curve)
    r = c.r
    F = _F(curve)
    N = r1cs.domain_size
    n = r1cs.n_constraints
    P = r1cs.n_public + 1
    if r1cs.n_vars < P:
        raise ValueError("r1cs has fewer variables than public signals")
    k = N.bit_length() - 1
    tw = _toxic(curve, seed)
    tau, alpha, beta, delta = tw["tau"], tw["alpha"], tw["beta"], tw["delta"]
    del tw
    omega = root_of_unity(c, k)
    zt = (pow(tau, N, r) - 1) % r  # Z(tau) = tau^N − 1
    if zt == 0:
        raise ZeroDivisionError("tau landed in the domain; run setup again")

    # Lagrange basis at tau: L_i(tau) = Z(tau)/N · w^i / (tau − w^i)
    wp = F.powers(omega, N)
    lag = F.mul(F.scale(wp, zt * pow(N, -1, r)), F.batch_inv(F.sub(_const(tau, N, r), wp)))

    a_full = _a_with_public_rows(r1cs, N)
    b_full = _pad_rows(r1cs.b, N)
    u = _transpose_matvec(curve, a_full, r1cs.n_vars, lag)
    v = _transpose_matvec(curve, b_full, r1cs.n_vars, lag)
    w = _transpose_matvec(curve, r1cs.c, r1cs.n_vars, np.ascontiguousarray(lag[:n]))
    # (beta·u_i + alpha·v_i + w_i): divided by gamma = 1 for IC, by delta for the private C points
    k_all = F.add(F.add(F.scale(u, beta), F.scale(v, alpha)), w)
    ic_s = np.ascontiguousarray(k_all[:P])
    c_s = F.scale(np.ascontiguousarray(k_all[P:]), pow(delta, -1, r)) if r1cs.n_vars > P else k_all[P:]

    # H_j on the coset x_j = g·w^j (g = snarkjs's shift): the coset Lagrange basis times
    # Z(tau)/(Z(x_j)·delta), Z(x_j) = g^N − 1, so that sum_j (ab − c)(x_j)·H_j = h(tau)·Z(tau)/delta
    g = native.h_shift(curve, N)
    gN = pow(g, N, r)
    xs = F.scale(wp, g)
    num = (pow(tau, N, r) - gN) * zt % r
    den = N * gN % r * ((gN - 1) % r) % r * delta % r
    h_s = F.mul(F.scale(xs, num * pow(den, -1, r)), F.batch_inv(F.sub(_const(tau, N, r), xs)))
    t1 = time.perf_counter()

    g1b = _skip_zeros(native.g1_mul_generator_batch, 2 * c.fp_limbs)
    g2b = _skip_zeros(native.g2_mul_generator_batch, 4 * c.fp_limbs)
    fixed = np.stack([_const(x, 1, r)[0] for x in (alpha, beta, delta)])
    alpha1, beta1, delta1 = g1b(curve, fixed)
    beta2, delta2 = g2b(curve, np.ascontiguousarray(fixed[1:]))
    gamma2 = g2b(curve, _const(1, 1, r))[0]
    pk = ProvingKey(
        curve=curve,
        n_vars=r1cs.n_vars,
        n_public=r1cs.n_public,
        domain_size=N,
        n_constraints=n,
        alpha1=alpha1,
        beta1=beta1,
        beta2=beta2,
        gamma2=gamma2,
        delta1=delta1,
        delta2=delta2,
        ic=g1b(curve, ic_s),
        a_points=g1b(curve, u),
        b1_points=g1b(curve, v),
        b2_points=g2b(curve, v),
        c_points=g1b(curve, np.ascontiguousarray(c_s)) if c_s.shape[0] else np.zeros((0, 2 * c.fp_limbs), np.uint64),
        h_points=g1b(curve, h_s),
        a_matrix=a_full,
        b_matrix=b_full,
        cs_hash=cs_hash_of(r1cs),
        provenance=DEV_SETUP_NOTICE,
    )
    del tau, alpha, beta, delta
    log.info(
        "development setup done: domain 2^%d, scalars %.2f s, points %.2f s",
        k, t1 - t0, time.perf_counter() - t1,
    )
    return pk, pk.vk


def synthetic_circuit(
    curve: str, n_constraints: int, n_public: int = 2, seed: int = 0
) -> tuple[R1CS, np.ndarray]:
    """A satisfiable R1CS of exactly n_constraints rows and its witness, for tests and benches.

    Row i: (s_i + 3·x_p) · (s_{i+1} + x_q) = t_i, with x_p, x_q public inputs (the constant 1
    when there are none), s random private inputs and t_i the products. Built and solved with
    numpy and the native kernels, so 2^20 rows take seconds.
    """
    c = get_curve(curve)
    m = int(n_constraints)
    P = int(n_public)
    rng = np.random.default_rng(seed)

    def rand(k: int) -> np.ndarray:
        x = rng.integers(0, 2**64, size=(k, 4), dtype=np.uint64)
        x[:, 3] &= np.uint64((1 << 61) - 1)  # < 2^253 < r for both curves
        return x

    pub = rand(P)
    s = rand(m + 1)
    i = np.arange(m, dtype=np.int64)
    p_idx = (i % P) + 1 if P else np.zeros(m, np.int64)
    q_idx = ((i + 1) % P) + 1 if P else np.zeros(m, np.int64)
    s0 = 1 + P  # first s variable
    t0 = s0 + m + 1  # first t variable
    n_vars = t0 + m
    one = np.zeros((1, 4), np.uint64)
    one[0, 0] = 1
    wit_head = np.concatenate([one, pub, s])
    a_val = native.fr_add(curve, s[:m], _fr_scale3(curve, wit_head[p_idx]))
    b_val = native.fr_add(curve, s[1:], np.ascontiguousarray(wit_head[q_idx]))
    t = native.fr_mul(curve, a_val, b_val)
    witness = np.ascontiguousarray(np.concatenate([wit_head, t]))

    def two_terms(first: np.ndarray, second: np.ndarray, k2: int) -> SparseMatrix:
        cols = np.stack([first, second], axis=1).reshape(-1)
        coeffs = np.zeros((2 * m, 4), np.uint64)
        coeffs[0::2, 0] = 1
        coeffs[1::2, 0] = k2
        return SparseMatrix(row_ptr=np.arange(0, 2 * m + 1, 2, dtype=np.int64), cols=cols, coeffs=coeffs)

    a = two_terms(s0 + i, p_idx, 3)
    b = two_terms(s0 + 1 + i, q_idx, 1)
    cm = SparseMatrix(
        row_ptr=np.arange(m + 1, dtype=np.int64),
        cols=t0 + i,
        coeffs=np.ascontiguousarray(np.concatenate([one] * m) if m else np.zeros((0, 4), np.uint64)),
    )
    del c
    return R1CS(curve=curve, n_vars=n_vars, n_public=P, a=a, b=b, c=cm), witness


def _fr_scale3(curve: str, x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return native.fr_add(curve, native.fr_add(curve, x, x), x)
