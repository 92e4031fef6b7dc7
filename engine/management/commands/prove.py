"""manage.py prove <circuit.zkey> <witness.wtns> <proof.json> <public.json> [--device cpu|cuda:N]

Behaves like rapidsnark's prover: reads a snarkjs Groth16 .zkey and .wtns (BN254 or
BLS12-381), writes snarkjs-compatible proof.json and public.json, exits 0; on a bad file or
a witness that does not satisfy the circuit it prints a clear error and exits non-zero.

A .zkey carries no C matrix, so a bad witness is caught by verifying the fresh proof against
the key's own verification key (skip with --no-verify), or, given --r1cs, row by row before
proving.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Prove a snarkjs Groth16 circuit (.zkey + .wtns) and write proof.json and public.json."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("zkey", type=Path)
        parser.add_argument("wtns", type=Path)
        parser.add_argument("proof", type=Path)
        parser.add_argument("public", type=Path)
        parser.add_argument("--device", default=None, help="cpu, cuda:N or auto (default: auto)")
        parser.add_argument("--r1cs", type=Path, default=None, help="check the witness against this .r1cs first")
        parser.add_argument("--no-verify", action="store_true", help="skip verifying the proof before writing it")

    def handle(self, *args: Any, **opts: Any) -> None:
        from engine.prover import groth16, select_device
        from engine.prover.snarkjs import (
            FormatError,
            read_r1cs,
            read_wtns_with_curve,
            read_zkey,
            write_proof_json,
            write_public_json,
        )
        from engine.prover.verify import InvalidProof, verify

        try:
            device = select_device(opts["device"])
        except ValueError as e:
            raise CommandError(str(e)) from None
        t0 = time.perf_counter()
        try:
            pk = read_zkey(opts["zkey"])
            curve, witness = read_wtns_with_curve(opts["wtns"])
        except FileNotFoundError as e:
            raise CommandError(f"no such file: {e.filename}") from None
        except (FormatError, OSError) as e:
            raise CommandError(f"bad input file: {e}") from None
        if curve != pk.curve:
            raise CommandError(f"the witness is over {curve}, the proving key over {pk.curve}")
        if witness.shape[0] != pk.n_vars:
            raise CommandError(f"the witness has {witness.shape[0]} values, the proving key expects {pk.n_vars}")
        try:
            if opts["r1cs"] is not None:
                r1cs = read_r1cs(opts["r1cs"])
                if (r1cs.curve, r1cs.n_vars, r1cs.n_public) != (pk.curve, pk.n_vars, pk.n_public):
                    raise CommandError("the .r1cs does not match the proving key (curve, signals or public count)")
                checked = groth16.assignment_from_r1cs(r1cs, witness)
                groth16.check_satisfied(r1cs.curve, checked.a, checked.b, checked.c)
            assignment = groth16.assignment_from_witness(pk, witness)
            t1 = time.perf_counter()
            proof = groth16.prove(pk, assignment, device=device)
            t2 = time.perf_counter()
        except groth16.UnsatisfiedConstraint as e:
            raise CommandError(f"the witness does not satisfy the circuit: {e}") from None
        except FormatError as e:
            raise CommandError(f"bad input file: {e}") from None
        except ValueError as e:
            raise CommandError(str(e)) from None
        public = groth16.public_inputs_of(assignment)
        if not opts["no_verify"]:
            try:
                ok = verify(pk.vk, proof, public)
            except InvalidProof as e:
                raise CommandError(f"the proof is malformed: {e}") from None
            if not ok:
                raise CommandError(
                    "the witness does not satisfy the circuit: the proof failed verification against the key"
                )
        write_proof_json(opts["proof"], proof)
        write_public_json(opts["public"], public)
        self.stderr.write(
            f"proved {pk.curve} circuit ({pk.n_vars} signals, domain {pk.domain_size}) on {device}: "
            f"load {t1 - t0:.2f} s, prove {t2 - t1:.2f} s"
            + ("" if opts["no_verify"] else ", verified")
        )

