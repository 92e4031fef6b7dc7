"""The Groth16 steps of kernels/groth16.h, over buffers: bytes from a file, or numpy
arrays, each the kernels' layout (little-endian u64 limbs; points affine Montgomery, all-zero
for infinity; scalars standard form). One implementation of the proof's randomisation and of
the verifier, shared by engine.prover.groth16 and engine.prover.verify (numpy arrays) and the
command line's engine.prover.zkey_prover (bytes): no numpy here.
"""

from __future__ import annotations

import os
from typing import Any

from engine.prover.backends.cpu import native_build
from engine.prover.datatypes import InvalidProof, Proof
from engine.prover.params.curves import CurveParams, coords_from_mont

_ERR_BYTES = 256
# Machines whose loads take any alignment, so a mapped file's sections are read where they lie.
_UNALIGNED_OK = frozenset({"x86_64", "AMD64", "aarch64", "arm64"})
Buffer = Any  # bytes, bytearray or a C-contiguous numpy array of the kernels' layout


class RefusedInput(ValueError):
    """A kernel refused one of its inputs: ``which`` is "key" or "witness". The backend reads no
    file, so the caller that knows which file held the input names it (a FormatError)."""

    def __init__(self, which: str, message: str) -> None:
        super().__init__(message)
        self.which = which
        self.message = message


class _Call:
    """One curve's kernels, the buffers handed to them as C pointers, and their error text."""

    def __init__(self, curve: CurveParams) -> None:
        self.ffi, self.lib = native_build.build()
        self.curve = curve
        self.err = self.ffi.new("char[]", _ERR_BYTES)
        self.keep: list[Any] = []

    def fn(self, name: str) -> Any:
        return getattr(self.lib, f"{self.curve.name}_{name}")

    def u64(self, data: Buffer, offset_words: int = 0) -> Any:
        """A uint64_t pointer into ``data``, 8-byte aligned, valid while this call object lives:
        it keeps the buffer's cdata, since a pointer derived from it (``+ offset``) does not,
        and a temporary made in an argument list would be freed before the kernel reads it."""
        if isinstance(data, self.ffi.CData):  # a C-heap vector (Scratch): already a uint64_t pointer
            return data + offset_words
        ptr = self.ffi.from_buffer("uint64_t[]", data)
        if int(self.ffi.cast("uintptr_t", ptr)) % 8:  # CPython's bytes and numpy's arrays are aligned; be sure
            size = self.ffi.sizeof(ptr)
            ptr = self.ffi.new("uint64_t[]", size // 8)
            self.ffi.memmove(ptr, data, size)
        self.keep.append(ptr)
        return ptr + offset_words

    def in_place(self, data: Buffer) -> Any:
        """A uint64_t pointer to ``data`` itself, aligned or not: a mapped file's sections lie
        where the file puts them (4 bytes apart in a zkey), and a copy to align one would be
        the copy that mapping avoids. The kernels read such a buffer only through plain loads,
        which x86-64 and AArch64 take at any alignment; elsewhere it is copied (u64)."""
        if os.uname().machine not in _UNALIGNED_OK:
            return self.u64(data)
        ptr = self.ffi.cast("uint64_t *", self.bytes(data))
        self.keep.append(ptr)
        return ptr

    def bytes(self, data: Buffer) -> Any:
        ptr = self.ffi.from_buffer(data)
        self.keep.append(ptr)
        return ptr

    def out(self, words: int) -> Any:
        return self.ffi.new("uint64_t[]", words)

    def message(self) -> str:
        return self.ffi.string(self.err).decode()


def _limbs(value: int) -> bytes:
    return value.to_bytes(32, "little")


def random_scalar(curve: CurveParams) -> int:
    """A proof's randomiser, uniform in [1, r): drawn 128 bits wider than r, so reducing it
    leaves a bias below 2^-128."""
    return 1 + int.from_bytes(os.urandom(48), "little") % (curve.r - 1)


def point_words(curve: CurveParams) -> tuple[int, int]:
    """u64 words of a G1 and a G2 point."""
    return 2 * curve.fp_limbs, 4 * curve.fp_limbs


def proof_from_bytes(curve: CurveParams, raw: bytes) -> Proof:
    """pi_a | pi_b | pi_c (affine Montgomery limbs) as the Proof of affine ints, standard form."""
    g1, g2 = point_words(curve)
    split = 8 * g1, 8 * (g1 + g2)
    (a,), (b,), (c,) = (coords_from_mont(part, curve, coords) for part, coords in
                        ((raw[: split[0]], 2), (raw[split[0] : split[1]], 4), (raw[split[1] :], 2)))
    return Proof(curve=curve.name, pi_a=None if a is None else (a[0], a[1]),
                 pi_b=None if b is None else ((b[0], b[1]), (b[2], b[3])), pi_c=None if c is None else (c[0], c[1]))


def g1_add(curve: CurveParams, p: Buffer, q: Buffer) -> bytes:
    """p + q of two affine G1 points (all-zero: infinity): C's MSM and H's, summed."""
    k = _Call(curve)
    out = k.out(point_words(curve)[0])
    k.fn("g1_add_affine_api")(out, k.u64(p), k.u64(q))
    return bytes(k.ffi.buffer(out))


def assemble(curve: CurveParams, msm_a: Buffer, msm_b1: Buffer, msm_b2: Buffer, msm_ch: Buffer, alpha1: Buffer,
             beta1: Buffer, beta2: Buffer, delta1: Buffer, delta2: Buffer, r: int, s: int) -> bytes:
    """pi_a | pi_b | pi_c from the MSMs (A, B1, B2, C + H), the key's points and r, s."""
    k = _Call(curve)
    g1, g2 = point_words(curve)
    proof = k.out(2 * g1 + g2)
    k.fn("groth16_assemble")(proof, proof + g1, proof + g1 + g2,
                             *(k.u64(b) for b in (msm_a, msm_b1, msm_b2, msm_ch, alpha1, beta1, beta2, delta1, delta2)),
                             k.u64(_limbs(r % curve.r)), k.u64(_limbs(s % curve.r)))
    return bytes(k.ffi.buffer(proof))


def scratch(curve: CurveParams, rows: int) -> Any:
    """``rows`` zeroed scalars on the C heap, freed when the returned pointer is dropped: a
    proof's domain vectors, kept out of Python's allocator (the command's memory is the
    kernels' and the mapped key's, which tests/prover/test_zkey_memory.py traces apart)."""
    k = _Call(curve)
    ptr = k.fn("groth16_alloc")(4 * rows)
    if ptr == k.ffi.NULL:
        raise MemoryError(f"out of memory for a domain of {rows} rows")
    return k.ffi.gc(ptr, k.fn("groth16_free"), size=32 * rows)


def check_witness(curve: CurveParams, witness: Buffer, n_vars: int) -> None:
    """Raises RefusedInput("witness") unless every value is below r and witness[0] is 1."""
    k = _Call(curve)
    if k.fn("groth16_check_witness")(k.u64(witness), n_vars, k.err, _ERR_BYTES):
        raise RefusedInput("witness", k.message())


def evaluate(curve: CurveParams, entries: Buffer, n_coef: int, witness: Buffer, n_vars: int, domain_size: int,
             threads: int, *, mapped: bool = False) -> tuple[Any, Any, Any]:
    """a = A w, b = B w (from a zkey's coefficient entries: section 4 after its count) and
    c = a b over the domain, standard form, on the C heap; the entries' pages given back when
    ``mapped``. Raises RefusedInput("key") naming the first bad entry."""
    k = _Call(curve)
    a, b, c = (scratch(curve, domain_size) for _ in range(3))
    bad = k.fn("groth16_evaluate")(a, b, c, k.bytes(entries), n_coef, k.u64(witness), n_vars, domain_size, threads,
                                   int(mapped))
    if bad >= 0:
        raise RefusedInput("key", f"coefficient entry {bad} is out of range or not reduced")
    return a, b, c


def msm_pool(curve: CurveParams, jobs: list[tuple[str, Buffer, Buffer, int]], threads: int, *, h: Any = None,
             evals: tuple[Any, Any, Any] | None = None, domain_size: int = 0, mapped: bool = False) -> list[bytes]:
    """Several MSMs on one thread team (kernels/groth16.h groth16_msm_pool), the largest first:
    each job (group "g1" or "g2", bases, scalars, first_row) sums scalars[first_row + i]
    bases[i] over every base (all-zero ones skipped) into one affine point. With ``evals``
    (a, b, c: scratch, handed over: the pool frees them once H is made), H is made into ``h``
    among them, before the plans of the jobs whose scalars are ``h``. ``mapped``: the bases are views of a read-only file mapping, read in
    place and given back once planned."""
    k = _Call(curve)
    g1, g2 = point_words(curve)
    words = [g2 if group == "g2" else g1 for group, *_ in jobs]
    outs = [k.out(w) for w in words]
    points = k.in_place if mapped else k.u64
    bases = [points(b) for _, b, _, _ in jobs]
    scalars = [k.u64(sc, 4 * first) for _, _, sc, first in jobs]
    rows = [memoryview(b).nbytes // (8 * w) for (_, b, _, _), w in zip(jobs, words, strict=True)]
    a, b, c = evals if evals is not None else (k.ffi.NULL,) * 3
    k.fn("groth16_msm_pool")(k.ffi.new("uint64_t *[]", outs), k.ffi.new("const uint64_t *[]", bases),
                             k.ffi.new("const uint64_t *[]", scalars), k.ffi.new("size_t[]", rows),
                             k.ffi.new("int[]", [group == "g2" for group, *_ in jobs]), len(jobs),
                             h if h is not None else k.ffi.NULL, a, b, c, max(domain_size.bit_length() - 1, 0),
                             threads, int(mapped), int(evals is not None))
    if evals is not None:  # the pool freed them once H was made: their owners must not again
        for v in evals:
            k.ffi.gc(v, None)
    return [bytes(k.ffi.buffer(o)) for o in outs]


def check_key(curve: CurveParams, alpha1: Buffer, beta2: Buffer, gamma2: Buffer, delta2: Buffer, ic: Buffer,
              n_ic: int) -> None:
    """Raises InvalidProof naming the first verifying-key point that is not a point of its group."""
    k = _Call(curve)
    if k.fn("groth16_check_key")(*(k.u64(b) for b in (alpha1, beta2, gamma2, delta2, ic)), n_ic, k.err, _ERR_BYTES):
        raise InvalidProof(k.message())


def alpha_beta(curve: CurveParams, alpha1: Buffer, beta2: Buffer) -> bytes:
    """e(alpha1, beta2)'s Miller loop: the same for every proof under a key."""
    k = _Call(curve)
    out = k.out(12 * curve.fp_limbs)
    k.fn("miller_loop_api")(out, k.u64(alpha1), k.u64(beta2), 1)
    return bytes(k.ffi.buffer(out))


def verify(curve: CurveParams, proof: Buffer, gamma2: Buffer, delta2: Buffer, ic: Buffer, public: Buffer,
           n_public: int, ab: bytes, *, public_offset_words: int = 0) -> bool:
    """Whether the proof (pi_a | pi_b | pi_c) verifies; public: n_public scalars (from
    ``public_offset_words`` into the buffer); ab: alpha_beta(). The key is checked apart
    (check_key). Raises InvalidProof naming a proof point or public input that is malformed."""
    k = _Call(curve)
    code = k.fn("groth16_verify")(k.u64(proof), k.u64(gamma2), k.u64(delta2), k.u64(ic),
                                  k.u64(public, public_offset_words), n_public, k.u64(ab), k.err, _ERR_BYTES)
    if code == 2:
        raise InvalidProof(k.message())
    return code == 0
