"""keys list | preload <circuit> | evict <circuit>: operators' key control from the shell.

``list`` shows every running host's resident keys (tier, bytes, in use, last use, load time) as
/status does, from one snapshot of the records. ``preload`` and ``evict`` write the same requests
as the API's POST /keys/{circuit}/preload and /evict (engine.ledger.key_requests); each host's
engine is woken when they commit and carries them out at once (at its next heartbeat should the
wake be lost). ``--wait`` waits for the outcome.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import CommandError, CommandParser

from engine.format import fmt_bytes
from engine.ledger.key_requests import DoesNotFit, KeyRequestInvalid, ask
from engine.management.commands._common import RecordsCommand
from engine.models import KeyRequest
from engine.status.read_model import live_farm


class Command(RecordsCommand):
    help = ("Proving keys on the engine hosts: list them with their tier (hot: in memory, warm: memory-mapped), "
            "preload one to a tier, or evict one to warm or cold.")

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="{list,preload,evict}")
        sub.add_parser("list", help="every running host's resident keys: tier, bytes, in use, last use, load time")
        for action, tiers, default, what in (("preload", ("hot", "warm"), "hot", "load a circuit's key to a tier"),
                                             ("evict", ("warm", "cold"), "cold", "demote a circuit's key")):
            p = sub.add_parser(action, help=what)
            p.add_argument("circuit", help="the circuit id: <kind>/<scale> or circom/<sha256>")
            p.add_argument("--tier", choices=tiers, default=default, help=f"the tier (default {default})")
            p.add_argument("--host", default=None, help="one engine host by name (default: every running host)")
            p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                           help="wait up to this long for the hosts to carry it out and print the outcome")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["action"] == "list":
            self._list()
            return
        try:
            rows = ask(opts["circuit"], opts["action"], opts["tier"], opts["host"], requested_by="manage.py keys")
        except KeyRequestInvalid as exc:
            raise CommandError(f"{exc.field}: {exc.detail}") from None
        except DoesNotFit as exc:
            raise CommandError(f"refused: {exc}") from None
        for row in rows:
            # What the host may reserve for it (its fixed-base tables at their bound), not yet
            # what it holds: `keys list` shows that once it is loaded.
            need = f", reserving at most {fmt_bytes(row.needed_bytes)}" if row.action == KeyRequest.Action.PRELOAD else ""
            self.stdout.write(f"asked {row.host.name} to {row.action} {row.circuit_id} to {row.tier}{need}: "
                              f"request {row.pk}")
        if opts["wait"] > 0:
            self._wait([r.pk for r in rows], opts["wait"])

    def _wait(self, ids: list[int], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not KeyRequest.objects.filter(pk__in=ids, state=KeyRequest.State.PENDING).exists():
                break
            time.sleep(0.2)  # polling a row the engine writes: the command has nothing else to do
        failed = []
        for row in KeyRequest.objects.filter(pk__in=ids).select_related("host"):
            holds = self._holds(row)
            self.stdout.write(f"{row.host.name}: {row.state}{': ' + row.reason if row.reason else ''}{holds}")
            if row.state in (KeyRequest.State.REFUSED, KeyRequest.State.FAILED):
                failed.append(row.host.name)
        if failed:
            raise CommandError(f"not carried out on {', '.join(failed)}")

    @staticmethod
    def _holds(row: KeyRequest) -> str:
        """", holding <bytes>" for a key a preload left resident, as its host recorded it."""
        if row.state != KeyRequest.State.DONE or row.action != KeyRequest.Action.PRELOAD:
            return ""
        held = [int(e.get("bytes") or 0) for e in row.host.key_cache or []
                if isinstance(e, dict) and e.get("circuit_id") == row.circuit_id]
        return f", holding {fmt_bytes(held[0])}" if held else ""

    def _list(self) -> None:
        with live_farm(whole=True) as farm:
            pass
        rows = [("HOST", "CIRCUIT", "TIER", "HOLDS", "MAPPED", "IN USE BY", "LAST USED", "LOADED IN")]
        for host in farm.live_hosts:
            for key in farm.held[host.pk].keys:
                rows.append((host.name, key.circuit_id, key.tier, fmt_bytes(key.bytes),
                             fmt_bytes(key.mapped_bytes) if key.tier == "warm" else "-",
                             f"{key.users} partition(s)",
                             key.last_used_at.strftime("%H:%M:%S") if key.last_used_at else "-",
                             f"{key.load_seconds:.2f} s" if key.load_seconds is not None else "?"))
        if len(rows) == 1:
            self.stdout.write("no proving key is resident on a running host")
            return
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            self.stdout.write("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
