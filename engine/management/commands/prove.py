"""manage.py prove <circuit.zkey> <witness.wtns> <proof.json> <public.json> [--device cpu|cuda:N]
(or --wasm circuit.wasm --input input.json in place of the witness)

An alias of the `provingsite-prove` console script (engine/prover/cli.py): same arguments,
same files, same errors. The console script starts faster, as it skips Django's start-up.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from engine.management.commands._common import build_kernels
from engine.prover import cli


class Command(BaseCommand):
    help = cli.DESCRIPTION

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_arguments(parser)

    def handle(self, *args: Any, **opts: Any) -> None:
        # A first run compiles the kernels: say so on stderr (stdout stays the prover's).
        build_kernels(self.stderr, opts["device"] or "auto")
        try:
            wtns, proof, public = cli.split_files(opts["files"], opts["wasm"], opts["input"])
            summary = cli.prove_files(opts["zkey"], wtns, proof, public, device=opts["device"], r1cs=opts["r1cs"],
                                      check=not opts["no_verify"], wasm=opts["wasm"], inputs=opts["input"])
        except cli.ProveError as e:
            raise CommandError(str(e)) from None
        self.stderr.write(summary)
