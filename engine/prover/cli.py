"""provingsite-prove <circuit.zkey> <witness.wtns> <proof.json> <public.json> [--device cpu|cuda:N]
   provingsite-prove <circuit.zkey> --wasm <circuit.wasm> --input <input.json> <proof.json> <public.json>

Behaves like rapidsnark's prover: reads a snarkjs Groth16 .zkey and .wtns (BN254 or
BLS12-381), writes snarkjs-compatible proof.json and public.json, exits 0; on a bad file or
a witness that does not satisfy the circuit it prints a clear error and exits 1.

With --wasm and --input the witness is computed from the circuit's input signals by circom's
witness generator (as `snarkjs groth16 fullprove` does), in place of a .wtns.

A .zkey carries no C matrix, so a bad witness is caught by verifying the fresh proof against
the key's own verification key (skip with --no-verify), or, given --r1cs, row by row before
proving.

Every proof goes through the engine's one orchestration (engine.prover.groth16). A .zkey and a
.wtns proved on the CPU are handed to it as the mapped file (engine.prover.zkey_prover): the
command then loads only the standard library and the compiled kernels, never numpy, and a
small circuit is proved in little more than the proof's own time. The GPU, --wasm and
--r1cs hand it the key read into arrays, which the numeric stack serves. `manage.py prove` is the same command behind Django's start-up.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from engine.prover.datatypes import Proof
    from engine.prover.keys import ProvingKey

DESCRIPTION = "Prove a snarkjs Groth16 circuit (.zkey + .wtns) and write proof.json and public.json."
UNSATISFIED_BY_VERIFICATION = "the witness does not satisfy the circuit: the proof failed verification against the key"


class ProveError(Exception):
    """Why the command refused, in one line for the person at the terminal."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments, shared with `manage.py prove`."""
    parser.add_argument("zkey", type=Path, help="the circuit's snarkjs Groth16 .zkey")
    parser.add_argument("files", type=Path, nargs="+", metavar="FILE",
                        help="witness.wtns proof.json public.json (or proof.json public.json with --wasm/--input)")
    parser.add_argument("--wasm", type=Path, default=None, help="circom's witness generator: compute the witness")
    parser.add_argument("--input", type=Path, default=None, help="the input signals (JSON) for --wasm")
    parser.add_argument("--device", default=None, help="cpu, cuda:N or auto (default: auto)")
    parser.add_argument("--r1cs", type=Path, default=None, help="check the witness against this .r1cs first")
    parser.add_argument("--no-verify", action="store_true", help="skip verifying the proof before writing it")


def split_files(files: list[Path], wasm: Path | None, inputs: Path | None) -> tuple[Path | None, Path, Path]:
    """(witness or None, proof.json, public.json) from the positional files and --wasm/--input."""
    if (wasm is None) != (inputs is None):
        raise ProveError("--wasm and --input go together: the generator and the signals it reads")
    want = 2 if wasm is not None else 3
    if len(files) != want:
        shape = "proof.json public.json" if wasm is not None else "witness.wtns proof.json public.json"
        raise ProveError(f"expected {shape} after the zkey, got {len(files)} file(s)")
    return (None, files[0], files[1]) if wasm is not None else (files[0], files[1], files[2])


def _computed_witness(pk: ProvingKey, wasm: Path, inputs: Path) -> tuple[str, np.ndarray]:
    from engine.prover.formats.wasm_witness import WitnessError, calculate_witness, witness_array

    try:
        signals = json.loads(inputs.read_text())
        return pk.curve, witness_array(calculate_witness(wasm.read_bytes(), signals))
    except json.JSONDecodeError as e:
        raise ProveError(f"{inputs.name} is not JSON: {e}") from None
    except WitnessError as e:
        raise ProveError(f"input {e}") from None


@contextlib.contextmanager
def _reading() -> Iterator[None]:
    """Reading the input files: what goes wrong, as the command says it."""
    from engine.prover.datatypes import FormatError

    try:
        yield
    except FileNotFoundError as e:
        raise ProveError(f"no such file: {e.filename}") from None
    except (FormatError, OSError) as e:
        raise ProveError(f"bad input file: {e}") from None
    except ValueError as e:  # the witness does not fit the key
        raise ProveError(str(e)) from None


def _read_inputs(zkey: Path, wtns: Path | None, wasm: Path | None = None,
                 inputs: Path | None = None) -> tuple[ProvingKey, np.ndarray]:
    from engine.prover.snarkjs import check_witness_fits, read_wtns_with_curve, read_zkey

    with _reading():
        pk = read_zkey(zkey)
        if wtns is not None:
            curve, witness = read_wtns_with_curve(wtns)
        else:
            assert wasm is not None and inputs is not None
            curve, witness = _computed_witness(pk, wasm, inputs)
        check_witness_fits(curve, witness.shape[0], pk.curve, pk.n_vars)
    return pk, witness


def _check_against_r1cs(pk: ProvingKey, witness: np.ndarray, r1cs_path: Path) -> None:
    from engine.prover import groth16
    from engine.prover.snarkjs import read_r1cs

    r1cs = read_r1cs(r1cs_path)
    if (r1cs.curve, r1cs.n_vars, r1cs.n_public) != (pk.curve, pk.n_vars, pk.n_public):
        raise ProveError("the .r1cs does not match the proving key (curve, signals or public count)")
    checked = groth16.assignment_from_r1cs(r1cs, witness)
    groth16.check_satisfied(r1cs.curve, checked.a, checked.b, checked.c)


def _prove(pk: ProvingKey, witness: np.ndarray, device: str, r1cs_path: Path | None) -> tuple[Proof, list[int], float]:
    """(proof, public inputs, seconds spent proving)."""
    from engine.prover import groth16
    from engine.prover.datatypes import UnsatisfiedConstraint
    from engine.prover.snarkjs import FormatError

    try:
        if r1cs_path is not None:
            _check_against_r1cs(pk, witness, r1cs_path)
        assignment = groth16.assignment_from_witness(pk, witness)
        started = time.perf_counter()
        proof = groth16.prove(pk, assignment, device=device)
        seconds = time.perf_counter() - started
    except UnsatisfiedConstraint as e:
        raise ProveError(f"the witness does not satisfy the circuit: {e}") from None
    except FormatError as e:
        raise ProveError(f"bad input file: {e}") from None
    except ValueError as e:
        raise ProveError(str(e)) from None
    return proof, groth16.public_inputs_of(assignment), seconds


def _verify(pk: ProvingKey, proof: Proof, public: list[int]) -> None:
    # verify.py's public function: it picks the fastest pairing available (native when built)
    from engine.prover.verify import InvalidProof, verify

    try:
        ok = verify(pk.vk, proof, public)
    except InvalidProof as e:
        raise ProveError(f"the proof is malformed: {e}") from None
    if not ok:
        raise ProveError(UNSATISFIED_BY_VERIFICATION)


def _summary(curve: str, n_vars: int, domain: int, device: str, load_s: float, prove_s: float,
             verify_s: float | None) -> str:
    return (f"proved {curve} circuit ({n_vars} signals, domain {domain}) on {device}: "
            f"load {load_s:.2f} s, prove {prove_s:.2f} s"
            + (f", verified in {verify_s:.2f} s" if verify_s is not None else ""))


def _prove_zkey_wtns(zkey: Path, wtns: Path, proof_path: Path, public_path: Path, check: bool) -> str:
    """A .zkey and .wtns on the CPU: the orchestration over the mapped key (no numpy)."""
    from engine.prover import zkey_prover
    from engine.prover.backends.cpu import native_build
    from engine.prover.datatypes import FormatError, InvalidProof
    from engine.prover.formats.snarkjs_json import write_proof_json, write_public_json

    if not native_build.built():
        print("provingsite-prove: compiling the CPU kernels (once; about a minute on a small machine)",
              file=sys.stderr, flush=True)
    started = time.perf_counter()
    with _reading():
        inputs = zkey_prover.read_inputs(zkey, wtns)
    loaded = time.perf_counter()
    try:
        raw = zkey_prover.prove(inputs)
    except FormatError as e:
        raise ProveError(f"bad input file: {e}") from None
    except MemoryError as e:
        raise ProveError(str(e)) from None
    proved = time.perf_counter()
    if check:
        try:
            ok = zkey_prover.verify(inputs, raw)
        except InvalidProof as e:
            raise ProveError(f"the proof is malformed: {e}") from None
        if not ok:
            raise ProveError(UNSATISFIED_BY_VERIFICATION)
    verified = time.perf_counter()
    write_proof_json(proof_path, zkey_prover.proof_of(inputs, raw))
    write_public_json(public_path, inputs.public_inputs)
    return _summary(inputs.curve.name, inputs.n_vars, inputs.domain_size, "cpu", loaded - started, proved - loaded,
                    verified - proved if check else None)


def prove_files(zkey: Path, wtns: Path | None, proof_path: Path, public_path: Path, *, device: str | None = None,
                r1cs: Path | None = None, check: bool = True, wasm: Path | None = None,
                inputs: Path | None = None) -> str:
    """Prove ``zkey`` + ``wtns`` into ``proof_path`` and ``public_path``; returns the summary line.

    Raises ProveError with the reason (nothing is written) on a bad file, a bad device name or
    a witness that does not satisfy the circuit.
    """
    from engine.prover import select_device

    try:
        chosen = select_device(device)
    except ValueError as e:
        raise ProveError(str(e)) from None
    if chosen == "cpu" and wtns is not None and r1cs is None:
        return _prove_zkey_wtns(zkey, wtns, proof_path, public_path, check)
    from engine.prover.snarkjs import write_proof_json, write_public_json

    started = time.perf_counter()
    pk, witness = _read_inputs(zkey, wtns, wasm, inputs)
    loaded = time.perf_counter()
    proof, public, prove_s = _prove(pk, witness, chosen, r1cs)
    verified = time.perf_counter()
    if check:
        _verify(pk, proof, public)
    verify_s = time.perf_counter() - verified
    write_proof_json(proof_path, proof)
    write_public_json(public_path, public)
    return _summary(pk.curve, pk.n_vars, pk.domain_size, chosen, loaded - started, prove_s,
                    verify_s if check else None)


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, sized as it sizes itself but without importing shutil for it:
    argparse makes one for every add_argument, and shutil brings the compression modules in
    (4 ms, a twentieth of a small circuit's whole command)."""

    def __init__(self, prog: str) -> None:
        try:
            columns = int(os.environ["COLUMNS"])
        except (KeyError, ValueError):
            stdout = sys.__stdout__  # None where Python runs without a console
            try:
                columns = os.get_terminal_size(stdout.fileno()).columns if stdout is not None else 80
            except (AttributeError, ValueError, OSError):
                columns = 80
        super().__init__(prog, width=columns - 2)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="provingsite-prove", description=DESCRIPTION, formatter_class=_HelpFormatter)
    add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command: exit status 0 with both files written, 1 with the reason on stderr."""
    args = build_parser().parse_args(argv)
    try:
        wtns, proof, public = split_files(args.files, args.wasm, args.input)
        summary = prove_files(args.zkey, wtns, proof, public, device=args.device, r1cs=args.r1cs,
                              check=not args.no_verify, wasm=args.wasm, inputs=args.input)
    except ProveError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(summary, file=sys.stderr)
    return 0


def console_main() -> int:
    """The console script (and `python -m`): main(), then the heap frozen for the exit, whose
    last collection would otherwise walk every object the command loaded (4 to 5 ms, 3 % of
    a small circuit's whole command); the process ends at once, so nothing is left uncollected
    that matters. In-process callers use main(), which leaves the collector alone."""
    from engine.prover.config import process_defaults

    process_defaults()
    status = main()
    gc.freeze()
    return status


if __name__ == "__main__":
    sys.exit(console_main())
