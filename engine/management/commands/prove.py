"""manage.py prove <circuit.zkey> <witness.wtns> <proof.json> <public.json> [--device cpu|cuda:N]

An alias of the `provingsite-prove` console script (engine/prover/cli.py): same arguments,
same files, same errors. The console script starts faster, as it skips Django's start-up.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from engine.prover import cli


class Command(BaseCommand):
    help = cli.DESCRIPTION

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_arguments(parser)

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            summary = cli.prove_files(opts["zkey"], opts["wtns"], opts["proof"], opts["public"], device=opts["device"],
                                      r1cs=opts["r1cs"], check=not opts["no_verify"])
        except cli.ProveError as e:
            raise CommandError(str(e)) from None
        self.stderr.write(summary)
