"""The CPU kernels' numpy-level API: field vectors, NTTs, the H polynomial, sparse mat-vec,
MSMs and point operations, over both curves.

engine.prover.backends.cpu.native_build compiles and loads the kernels (its names are re-exported here:
build, default_threads, the ISA selection); cffi releases the GIL during calls, so callers
may run kernels from worker threads.

Arrays: scalars (n, 4) uint64 standard form; points affine Montgomery limbs, see curves.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.prover.backends.cpu.native_build import (
    ISA_ENV,
    ISA_FLAGS,
    KERNEL_DIR,
    KERNEL_FILES,
    SHARED_KERNEL_FILES,
    build,
    build_isa,
    cache_dir,
    cpu_supports,
    default_threads,
    params_prelude,
    select_isa,
    source_hash,
)
from engine.prover.params.curves import CurveParams, get_curve, root_of_unity

__all__ = [  # this module's API and the build's names it re-exports
    "ISA_ENV",
    "ISA_FLAGS",
    "KERNEL_DIR",
    "KERNEL_FILES",
    "SHARED_KERNEL_FILES",
    "build",
    "build_isa",
    "cache_dir",
    "coset_scale",
    "cpu_supports",
    "default_threads",
    "fp_add",
    "fp_inv",
    "fp_mul",
    "fp_sqr",
    "fp_sub",
    "fp2_add",
    "fp2_inv",
    "fp2_mul",
    "fp2_sqr",
    "fp2_sub",
    "fr_add",
    "fr_inv",
    "fr_mul",
    "fr_sqr",
    "fr_sub",
    "g1_add_affine",
    "g1_add_projective",
    "g1_double",
    "g1_mul_generator_batch",
    "g1_scalar_mul",
    "g1_shifted_copies",
    "g2_add_affine",
    "g2_add_projective",
    "g2_double",
    "g2_mul_generator_batch",
    "g2_scalar_mul",
    "g2_shifted_copies",
    "h_coset",
    "h_shift",
    "msm_g1",
    "msm_g1_batch",
    "msm_g1_copies",
    "msm_g1_copies_batch",
    "msm_g2",
    "msm_g2_batch",
    "msm_g2_copies",
    "msm_g2_copies_batch",
    "msm_window",
    "ntt",
    "params_prelude",
    "poseidon3",
    "run_witness_program",
    "select_isa",
    "source_hash",
    "sparse_matvec",
]

# ---------------------------------------------------------------------------------------------
# helpers


def _u64(arr: np.ndarray, width: int, name: str, rows: int | None = None) -> np.ndarray:
    a = np.asarray(arr)
    if a.dtype != np.uint64:
        raise TypeError(f"{name}: expected uint64, got {a.dtype}")
    if a.ndim != 2 or a.shape[1] != width:
        raise ValueError(f"{name}: expected shape (n, {width}), got {a.shape}")
    if rows is not None and a.shape[0] != rows:
        raise ValueError(f"{name}: expected {rows} rows, got {a.shape[0]}")
    return np.ascontiguousarray(a)


def _ptr(a: np.ndarray, ctype: str = "uint64_t *") -> Any:
    """A C pointer to ``a``'s data that keeps ``a`` alive as long as the pointer lives.

    A cast of ``a.ctypes.data`` does not: an array made inside a call's argument list
    (``fn(_ptr(_const_fr(w, c)))``) is freed before the call runs, and with the GIL released
    another thread's allocation then overwrites what the kernel reads (a wrong NTT root, a
    proof point that fails its subgroup check)."""
    ffi, _ = build()
    return ffi.from_buffer(ctype.replace(" *", "[]"), a)


# The public name, for the tests that call the kernels' entry points directly.
pointer = _ptr


def _const_fr(value: int, c: CurveParams) -> np.ndarray:
    return np.frombuffer((value % c.r).to_bytes(32, "little"), dtype="<u8").astype(np.uint64)


def _threads(threads: int | None) -> int:
    return default_threads() if threads is None else max(1, int(threads))


@dataclass(frozen=True)
class _Field:
    """Elementwise arithmetic over one of a curve's fields, Fr (scalars), Fp or Fp2 (point
    coordinates): one vec_op kernel serves all three, so each wrapper is written once here and
    bound to its fr_/fp_/fp2_ name below. Arrays: (n, limbs) uint64, standard form in and out
    (an Fp2 element is c0's limbs then c1's)."""

    name: str  # "fr", "fp" or "fp2", the infix of the kernels' names

    def _vec_op(self, curve: str, op: int, a: np.ndarray, b: np.ndarray | None) -> np.ndarray:
        """op: field_api.h's code, 0 add, 1 sub, 2 mul, 3 inv, 4 square (b unused by the last two)."""
        c = get_curve(curve)
        width = {"fr": c.fr_limbs, "fp": c.fp_limbs, "fp2": 2 * c.fp_limbs}[self.name]
        a = _u64(a, width, "a")
        bb = _u64(b, width, "b", a.shape[0]) if b is not None else a
        out = np.empty_like(a)
        _, lib = build()
        fn = getattr(lib, f"{c.name}_{self.name}_vec_op")
        fn(_ptr(out), _ptr(a), _ptr(bb), a.shape[0], op, default_threads())
        return out

    def add(self, curve: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self._vec_op(curve, 0, a, b)

    def sub(self, curve: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self._vec_op(curve, 1, a, b)

    def mul(self, curve: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self._vec_op(curve, 2, a, b)

    def inv(self, curve: str, a: np.ndarray) -> np.ndarray:
        """Elementwise inverse; 0 maps to 0."""
        return self._vec_op(curve, 3, a, None)

    def sqr(self, curve: str, a: np.ndarray) -> np.ndarray:
        return self._vec_op(curve, 4, a, None)


_FR, _FP, _FP2 = _Field("fr"), _Field("fp"), _Field("fp2")
fr_add, fr_sub, fr_mul, fr_inv, fr_sqr = _FR.add, _FR.sub, _FR.mul, _FR.inv, _FR.sqr
fp_add, fp_sub, fp_mul, fp_inv, fp_sqr = _FP.add, _FP.sub, _FP.mul, _FP.inv, _FP.sqr
fp2_add, fp2_sub, fp2_mul, fp2_inv, fp2_sqr = _FP2.add, _FP2.sub, _FP2.mul, _FP2.inv, _FP2.sqr


def _log2_exact(n: int) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"length must be a power of two, got {n}")
    return n.bit_length() - 1


def ntt(curve: str, a: np.ndarray, *, inverse: bool = False, threads: int | None = None) -> np.ndarray:
    """Evaluations A[k] = sum_j a[j] w^(jk) with snarkjs's root w of order n (or the inverse)."""
    c = get_curve(curve)
    out = _u64(a, 4, "a").copy()
    n = out.shape[0]
    w = root_of_unity(c, _log2_exact(n))
    ffi, lib = build()
    fn = getattr(lib, f"{c.name}_fr_ntt")
    if inverse:
        wv = _const_fr(pow(w, -1, c.r), c)
        sv = _const_fr(pow(n, -1, c.r), c)
        fn(_ptr(out), n, _ptr(wv), _ptr(sv), _threads(threads))
    else:
        fn(_ptr(out), n, _ptr(_const_fr(w, c)), ffi.NULL, _threads(threads))
    return out


def coset_scale(curve: str, a: np.ndarray, g: int, *, threads: int | None = None) -> np.ndarray:
    """a[k] * g^k."""
    c = get_curve(curve)
    out = _u64(a, 4, "a").copy()
    gv = _const_fr(g, c)
    _, lib = build()
    getattr(lib, f"{c.name}_fr_coset_scale")(_ptr(out), out.shape[0], _ptr(gv), _threads(threads))
    return out


def h_shift(curve: str | CurveParams, n: int) -> int:
    """snarkjs's coset generator for domain size n: w_{2n}, or nqr^2 when n = 2^two_adicity."""
    c = get_curve(curve)
    k = _log2_exact(n)
    if k == c.two_adicity:
        return c.nqr * c.nqr % c.r
    return root_of_unity(c, k + 1)


def h_coset(
    curve: str,
    a: np.ndarray,
    b: np.ndarray,
    c_: np.ndarray,
    shift: int | None = None,
    *,
    threads: int | None = None,
) -> np.ndarray:
    """a·b − c on the coset shift·<w> from their evaluations on <w> (snarkjs's H values).

    Each input is interpolated (iNTT), scaled by shift^k, re-evaluated (NTT). shift defaults
    to snarkjs's choice (h_shift).
    """
    cv = get_curve(curve)
    aa = _u64(a, 4, "a").copy()
    n = aa.shape[0]
    bb = _u64(b, 4, "b", n).copy()
    cc = _u64(c_, 4, "c", n).copy()
    if shift is None:
        shift = h_shift(cv, n)
    w = root_of_unity(cv, _log2_exact(n))
    out = np.empty_like(aa)
    consts = [_const_fr(v, cv) for v in (w, pow(w, -1, cv.r), pow(n, -1, cv.r), shift)]
    _, lib = build()
    getattr(lib, f"{cv.name}_fr_h_coset")(
        _ptr(out), _ptr(aa), _ptr(bb), _ptr(cc), n, *[_ptr(x) for x in consts], _threads(threads)
    )
    return out


def sparse_matvec(
    curve: str,
    row_ptr: np.ndarray,
    cols: np.ndarray,
    coeffs: np.ndarray,
    w: np.ndarray,
    *,
    threads: int | None = None,
) -> np.ndarray:
    """CSR mat-vec over Fr: out[i] = sum coeffs[k] * w[cols[k]] for k in row i."""
    c = get_curve(curve)
    rp = np.ascontiguousarray(row_ptr, dtype=np.int64)
    cl = np.ascontiguousarray(cols, dtype=np.int64)
    co = _u64(coeffs, 4, "coeffs", cl.shape[0])
    wv = _u64(w, 4, "w")
    rows = rp.shape[0] - 1
    if rows < 0 or (cl.shape[0] and (cl.min() < 0 or cl.max() >= wv.shape[0])):
        raise ValueError("cols out of range of w")
    if rp[0] != 0 or rp[-1] != cl.shape[0] or np.any(np.diff(rp) < 0):
        raise ValueError("row_ptr is not a valid CSR index")
    out = np.empty((rows, 4), dtype=np.uint64)
    _, lib = build()
    getattr(lib, f"{c.name}_fr_sparse_matvec")(
        _ptr(out),
        _ptr(rp, "int64_t *"),
        _ptr(cl, "int64_t *"),
        _ptr(co),
        _ptr(wv),
        rows,
        _threads(threads),
    )
    return out


def poseidon3(curve: str, states: np.ndarray, round_constants: np.ndarray, mds: np.ndarray, full_rounds: int,
              partial_rounds: int, *, threads: int | None = None) -> np.ndarray:
    """Poseidon's width-3 permutation (S-box x^5) of each of n states, (n, 3, 4) standard form
    in and out, with the caller's parameters: three round constants a round, (3·(full +
    partial), 4), and the MDS matrix row-major, (9, 4); full rounds split evenly around the
    partial ones (kernels/poseidon.h)."""
    c = get_curve(curve)
    if full_rounds < 0 or full_rounds % 2 or partial_rounds < 0:
        raise ValueError(f"rounds: expected an even full count and partial >= 0, got {full_rounds}, {partial_rounds}")
    rc = _u64(round_constants, 4, "round_constants", 3 * (full_rounds + partial_rounds))
    m = _u64(mds, 4, "mds", 9)
    st = np.ascontiguousarray(states)
    if st.dtype != np.uint64 or st.ndim != 3 or st.shape[1:] != (3, 4):
        raise ValueError(f"states: expected uint64 array of shape (n, 3, 4), got {st.dtype} {st.shape}")
    out = st.copy()
    _, lib = build()
    getattr(lib, f"{c.name}_fr_poseidon3_batch")(_ptr(out), out.shape[0], _ptr(rc), _ptr(m), full_rounds,
                                                  partial_rounds, _threads(threads))
    return out


def run_witness_program(curve: str, coefficients: np.ndarray, matrices: tuple[tuple[np.ndarray, np.ndarray,
                        np.ndarray], ...], ops: np.ndarray, solves: np.ndarray, b_src: np.ndarray, inputs: np.ndarray,
                        witness: np.ndarray, a: np.ndarray, b: np.ndarray, c_: np.ndarray, *, check: bool) -> int | None:
    """Run a circuit's witness program (kernels/witness_cpu.h) on one thread: fills ``witness``
    and the rows' A·w, B·w, C·w in ``a``, ``b``, ``c_`` (caller's arrays, written in place).

    ``coefficients``: the matrices' distinct coefficients, (k, 4) standard form, 1 first;
    ``matrices``: A, B and C as (row_ptr, cols, coefficient index) with int64 row pointers and
    columns and uint32 indices into ``coefficients``; ``ops``: (n, 4) int64 rows of (before row,
    variable, slot, bit); ``solves``: a uint8 per row; ``b_src``: per row, the row whose A·w its
    B·w equals (at most the row itself), or -1; ``inputs``: the slots' raw values, (slots, 4)
    uint64. The arrays must be the program's own, already checked against each other
    (engine.circuits.program); only shapes and types are checked here. With ``check``, the index
    of the first row that fails a·b = c, else None."""
    cv = get_curve(curve)
    rows = solves.shape[0]
    for name, arr, n in (("witness", witness, None), ("a", a, rows), ("b", b, rows), ("c", c_, rows)):
        if arr.dtype != np.uint64 or arr.ndim != 2 or arr.shape[1] != 4 or not arr.flags.c_contiguous \
                or not arr.flags.writeable or (n is not None and arr.shape[0] != n):
            raise ValueError(f"{name}: expected a writeable contiguous uint64 array of shape ({n or 'n'}, 4)")
    mats = [(np.ascontiguousarray(p, np.int64), np.ascontiguousarray(k, np.int64), np.ascontiguousarray(i, np.uint32))
            for p, k, i in matrices]
    if len(mats) != 3 or any(p.shape[0] != rows + 1 or i.shape != k.shape for p, k, i in mats):
        raise ValueError(f"matrices: expected A, B and C of {rows} rows, an index per entry")
    o = np.ascontiguousarray(ops, np.int64)
    if o.ndim != 2 or o.shape[1] != 4:
        raise ValueError(f"ops: expected shape (n, 4), got {o.shape}")
    table = _u64(coefficients, 4, "coefficients")
    values = _u64(inputs, 4, "inputs")
    flags = np.ascontiguousarray(solves, np.uint8)
    src = np.ascontiguousarray(b_src, np.int64)
    if flags.shape != (rows,) or src.shape != (rows,):
        raise ValueError(f"solves and b_src: expected one entry for each of {rows} rows")
    _, lib = build()
    csr = [_ptr(x, t) for p, k, i in mats for x, t in ((p, "int64_t *"), (k, "int64_t *"), (i, "uint32_t *"))]
    bad = getattr(lib, f"{cv.name}_fr_witness_run")(
        _ptr(witness), _ptr(a), _ptr(b), _ptr(c_), _ptr(values), _ptr(o, "int64_t *"), o.shape[0],
        _ptr(flags, "unsigned char *"), _ptr(src, "int64_t *"), _ptr(table), table.shape[0], *csr, rows, int(check))
    if bad == -2:
        raise MemoryError("the witness program's coefficient table could not be allocated")
    return None if bad < 0 else int(bad)


# ---------------------------------------------------------------------------------------------
# groups


def msm_window(curve: str, group: str, n: int) -> int:
    _, lib = build()
    return int(getattr(lib, f"{get_curve(curve).name}_{group}_msm_window")(n))


def _scalar_limbs(k: int | np.ndarray, c: CurveParams) -> np.ndarray:
    if isinstance(k, (int, np.integer)):
        return _const_fr(int(k), c)
    return np.ascontiguousarray(k, dtype=np.uint64).reshape(4)


@dataclass(frozen=True)
class _Group:
    """The entry points of one group, G1 (points over Fp) or G2 (over Fp2): the C kernels are
    the same template for both, so each wrapper is written once here and bound to its g1_/g2_
    name below. Points: affine Montgomery limbs, (2L,) for G1 and (4L,) for G2 with
    L = fp_limbs; all-zero limbs are the point at infinity."""

    name: str  # "g1" or "g2", the infix of the kernels' names

    def width(self, c: CurveParams) -> int:
        return (2 if self.name == "g1" else 4) * c.fp_limbs

    def _kernel(self, c: CurveParams, fn: str) -> Any:
        _, lib = build()
        return getattr(lib, f"{c.name}_{self.name}_{fn}")

    def msm(self, curve: str, bases: np.ndarray, scalars: np.ndarray, *, rows: np.ndarray | None = None,
            threads: int | None = None) -> np.ndarray:
        """sum scalars[i]·bases[i] -> one affine Montgomery point (zeros = infinity); over the
        indices ``rows`` only, when given (the kernel reads those rows in place)."""
        c = get_curve(curve)
        w = self.width(c)
        b = _u64(bases, w, "bases")
        s = _u64(scalars, 4, "scalars", b.shape[0])
        out = np.zeros(w, dtype=np.uint64)
        n, rows_ptr = self._rows(rows, b.shape[0])
        self._kernel(c, "msm")(_ptr(out), _ptr(b), _ptr(s), rows_ptr, n, _threads(threads))
        return out

    def shifted_copies(self, curve: str, bases: np.ndarray, copies: int, shift: int, *,
                       threads: int | None = None) -> np.ndarray:
        """(copies·n, width): block t is 2^(t·shift)·bases, the table msm_copies reads."""
        c = get_curve(curve)
        w = self.width(c)
        b = _u64(bases, w, "bases")
        if copies < 1 or shift < 1:
            raise ValueError(f"copies and shift must be positive, got {copies} and {shift}")
        out = np.empty((copies * b.shape[0], w), dtype=np.uint64)
        self._kernel(c, "shifted_copies")(_ptr(out), _ptr(b), b.shape[0], copies, shift, _threads(threads))
        return out

    def _copies_table(self, curve: str, table: np.ndarray, copies: int,
                      shift: int) -> tuple[Any, int, np.ndarray, int]:
        """A table of shifted copies, checked: (curve, point width, rows, rows per copy)."""
        from engine.prover.params.glv_params import glv_params

        c = get_curve(curve)
        w = self.width(c)
        t = _u64(table, w, "table")
        if copies < 1 or t.shape[0] % copies:
            raise ValueError(f"table: {t.shape[0]} rows is not {copies} copies")
        if copies * shift < glv_params(curve, self.name).bits:
            raise ValueError(f"{copies} slices of {shift} bits do not cover the GLV halves")
        return c, w, t, t.shape[0] // copies

    def msm_copies(self, curve: str, table: np.ndarray, scalars: np.ndarray, copies: int, shift: int, *,
                   rows: np.ndarray | None = None, threads: int | None = None) -> np.ndarray:
        """The msm of scalars over the bases whose shifted copies ``table`` holds; ``shift``
        must be the table's, and ``copies`` slices of it must cover the scalars' GLV halves."""
        c, w, t, stride = self._copies_table(curve, table, copies, shift)
        s = _u64(scalars, 4, "scalars", stride)
        out = np.zeros(w, dtype=np.uint64)
        n, rows_ptr = self._rows(rows, stride)
        self._kernel(c, "msm_copies")(_ptr(out), _ptr(t), _ptr(s), rows_ptr, n, stride, copies, shift,
                                      _threads(threads))
        return out

    def msm_copies_batch(self, curve: str, table: np.ndarray, scalars: np.ndarray, copies: int, shift: int, *,
                         rows: np.ndarray | None = None, threads: int | None = None) -> np.ndarray:
        """msm_copies for k scalar vectors at once, scalars of shape (k, n, 4) -> (k, width):
        one pass over the table's points per window, k bucket sets (a batch of proofs of one
        key); row v is exactly msm_copies(..., scalars[v], ...)."""
        c, w, t, stride = self._copies_table(curve, table, copies, shift)
        s = np.ascontiguousarray(scalars)
        if s.dtype != np.uint64 or s.ndim != 3 or s.shape[1] != stride or s.shape[2] != 4:
            raise ValueError(f"scalars: expected uint64 array of shape (k, {stride}, 4), got {s.dtype} {s.shape}")
        k = s.shape[0]
        out = np.zeros((k, w), dtype=np.uint64)
        if k == 0:
            return out
        n, rows_ptr = self._rows(rows, stride)
        self._kernel(c, "msm_copies_batch")(_ptr(out), _ptr(t), _ptr(s), stride, k, rows_ptr, n, stride, copies,
                                            shift, _threads(threads))
        return out

    def msm_batch(self, curve: str, bases: np.ndarray, scalars: np.ndarray, *, rows: np.ndarray | None = None,
                  threads: int | None = None) -> np.ndarray:
        """msm for k scalar vectors (k, n, 4) over the same bases -> (k, width): the bases
        themselves as a one-copy table (as msm does)."""
        return self.msm_copies_batch(curve, bases, scalars, 1, 256, rows=rows, threads=threads)

    def _rows(self, rows: np.ndarray | None, n: int) -> tuple[int, Any]:
        """(count, pointer) of the row indices a kernel reads (all n rows for None)."""
        if rows is None:
            return n, self._ffi_null()
        r = np.ascontiguousarray(rows, dtype=np.int64)
        if r.ndim != 1 or (r.shape[0] and (int(r.min()) < 0 or int(r.max()) >= n)):
            raise ValueError(f"rows: expected indices below {n}")
        return r.shape[0], _ptr(r, "int64_t *")

    @staticmethod
    def _ffi_null() -> Any:
        ffi, _ = build()
        return ffi.NULL

    def mul_generator_batch(
        self, curve: str, scalars: np.ndarray, *, base: np.ndarray | None = None, threads: int | None = None
    ) -> np.ndarray:
        """scalars[i]·G (or ·base) for every i, affine Montgomery (n, width): trusted-setup helper."""
        c = get_curve(curve)
        w = self.width(c)
        s = _u64(scalars, 4, "scalars")
        bv = self._generator_mont(c) if base is None else np.ascontiguousarray(base, np.uint64)
        if bv.shape != (w,):
            raise ValueError(f"base: expected shape ({w},)")
        out = np.empty((s.shape[0], w), dtype=np.uint64)
        self._kernel(c, "fixed_base_batch")(_ptr(out), _ptr(bv), _ptr(s), s.shape[0], _threads(threads))
        return out

    def _generator_mont(self, c: CurveParams) -> np.ndarray:
        from engine.prover.params.curves import g1_to_mont, g2_to_mont

        return g1_to_mont([c.g1], c)[0] if self.name == "g1" else g2_to_mont([c.g2], c)[0]

    def _point_op(self, curve: str, fn: str, *points: np.ndarray, scalar: np.ndarray | None = None) -> np.ndarray:
        c = get_curve(curve)
        w = self.width(c)
        arrs = []
        for a in points:
            v = np.ascontiguousarray(a, dtype=np.uint64).reshape(-1)
            if v.shape != (w,):
                raise ValueError(f"point: expected {w} limbs, got {v.shape}")
            arrs.append(v)
        if scalar is not None:
            k = np.ascontiguousarray(scalar, dtype=np.uint64).reshape(-1)
            if k.shape != (4,):
                raise ValueError("scalar: expected 4 limbs")
            arrs.append(k)
        out = np.zeros(w, dtype=np.uint64)
        self._kernel(c, fn)(_ptr(out), *[_ptr(a) for a in arrs])
        return out

    def add_affine(self, curve: str, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        """p + q (the mixed XYZZ + affine formula)."""
        return self._point_op(curve, "add_affine_api", p, q)

    def add_projective(self, curve: str, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        """p + q through the full XYZZ add formula (tests use it to cover that code path)."""
        return self._point_op(curve, "add_xyzz_api", p, q)

    def double(self, curve: str, p: np.ndarray) -> np.ndarray:
        return self._point_op(curve, "dbl_affine_api", p)

    def scalar_mul(self, curve: str, p: np.ndarray, k: int | np.ndarray) -> np.ndarray:
        """k·p; an int k is reduced mod r."""
        return self._point_op(curve, "scalar_mul_api", p, scalar=_scalar_limbs(k, get_curve(curve)))


_G1, _G2 = _Group("g1"), _Group("g2")
msm_g1, msm_g2 = _G1.msm, _G2.msm
g1_shifted_copies, g2_shifted_copies = _G1.shifted_copies, _G2.shifted_copies
msm_g1_copies, msm_g2_copies = _G1.msm_copies, _G2.msm_copies
msm_g1_copies_batch, msm_g2_copies_batch = _G1.msm_copies_batch, _G2.msm_copies_batch
msm_g1_batch, msm_g2_batch = _G1.msm_batch, _G2.msm_batch
g1_mul_generator_batch, g2_mul_generator_batch = _G1.mul_generator_batch, _G2.mul_generator_batch
g1_add_affine, g2_add_affine = _G1.add_affine, _G2.add_affine
g1_add_projective, g2_add_projective = _G1.add_projective, _G2.add_projective
g1_double, g2_double = _G1.double, _G2.double
g1_scalar_mul, g2_scalar_mul = _G1.scalar_mul, _G2.scalar_mul
