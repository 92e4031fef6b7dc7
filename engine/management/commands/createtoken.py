"""createtoken <name> [--operator]: issue an API token (printed once; only its hash is kept),
or --revoke it. A client token sees the jobs it submits; an operator token sees all and /status."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from engine.api.auth import TokenError, issue_token, revoke_token
from engine.models import TokenScope


class Command(BaseCommand):
    help = "Issue an API token for a client (shown once), or revoke one with --revoke."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="who the token is for, e.g. curio-east")
        parser.add_argument("--revoke", action="store_true", help="revoke the token of that name instead")
        parser.add_argument("--operator", action="store_true",
                            help="an operator token: sees every client's jobs and /status "
                                 "(default: a client token, which sees only the jobs it submits)")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            if opts["revoke"]:
                record = revoke_token(opts["name"])
                self.stdout.write(f"revoked {record.name} ({record.prefix}…) at {record.revoked_at:%Y-%m-%d %H:%M:%S}")
                return
            record, token = issue_token(opts["name"], TokenScope.OPERATOR if opts["operator"] else TokenScope.CLIENT)
        except TokenError as exc:
            raise CommandError(str(exc)) from None
        # The token alone on stdout, so `TOKEN=$(manage.py createtoken x)` works; the note on stderr.
        self.stdout.write(token)
        self.stderr.write(f"{record.scope} token for {record.name}: store it now, it is not shown again")
