"""Run the local Groth16 setup for the built-in circuits into the params directory, and record
each key's digest as the farm's (engine.ledger.keys): hosts with other keys refuse the kind."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from engine.circuits.keystore import KeyStore
from engine.circuits.kinds import KINDS, SCALES, circuit_for
from engine.ledger.keys import KeyMismatch, adopt_key
from engine.management.commands._common import RecordsCommand
from engine.prover.formats.snarkjs_json import vk_digest


class Command(RecordsCommand):
    help = "Generate proving/verification keys (zkey + verification_key.json + manifest) for built-in circuits."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--kind", action="append", choices=KINDS, help="a proof kind (repeatable; default: all four)")
        parser.add_argument("--scale", choices=SCALES, default=None, help="circuit scale (default: PROVINGSITE_SCALE)")
        parser.add_argument("--force", action="store_true", help="regenerate even if valid keys exist")

    def handle(self, *args, kind: list[str] | None, scale: str | None, force: bool, **options) -> None:
        scale = scale or settings.PROVINGSITE["SCALE"]
        kinds = kind or list(KINDS)
        keys = KeyStore(settings.PROVINGSITE["PARAMS_DIR"])
        self.stdout.write(f"params directory: {keys.params_dir}")
        for i, k in enumerate(kinds, 1):
            shape = circuit_for(k, scale)
            prefix = f"[{i}/{len(kinds)}] {shape.circuit_id}"
            if not force and keys.keys_present(shape):
                self._record(keys, shape.circuit_id, replace=False, prefix=prefix)
                self.stdout.write(f"{prefix}: keys present and checksummed, skipped (use --force to regenerate)")
                continue
            self.stdout.write(f"{prefix}: {shape.n_constraints:,} constraints, {shape.n_vars:,} variables, domain 2^{shape.domain_size.bit_length() - 1}; setting up…")
            self.stdout.flush()
            started = time.perf_counter()
            path = keys.ensure_keys(shape, force=True)
            mib = path.stat().st_size / 2**20
            self.stdout.write(self.style.SUCCESS(f"{prefix}: wrote {path.name} ({mib:.1f} MiB) in {time.perf_counter() - started:.1f} s"))
            self._record(keys, shape.circuit_id, replace=True, prefix=prefix)

    def _record(self, keys: KeyStore, circuit_id: str, *, replace: bool, prefix: str) -> None:
        """The keys become the farm's (FarmKey): new keys replace the record, as the operator
        asked; present ones are recorded where none is, and a mismatch is said, not hidden."""
        digest = vk_digest(keys.load_verifying_key(circuit_id))
        try:
            adopt_key(circuit_id, digest, "setupkeys", replace=replace)
        except KeyMismatch as exc:
            raise CommandError(f"{prefix}: {exc}") from None
