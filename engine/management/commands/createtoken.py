"""createtoken <name> [--operator] [--max-priority P] [--max-active N|none]: issue an API token
(printed once; only its hash is kept), or --revoke it. A client token sees the jobs it submits;
an operator token sees all and /status. Limits default to the scope's: a client may ask for
normal priority at most and hold 64 active jobs; an operator any priority and no cap."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from engine.ledger.submission import SubmissionRefused, callback_url_of
from engine.ledger.tokens import SCOPE_DEFAULT, ScopeDefault, TokenError, issue_token, revoke_token
from engine.management.commands._common import RecordsCommand
from engine.models import TokenScope
from engine.states import Priority

PRIORITY_NAMES = {label: int(number) for number, label in Priority.choices}


def _active_cap(text: str) -> int | None:
    if text.strip().lower() in {"none", "unlimited"}:
        return None
    try:
        return int(text)
    except ValueError:
        raise CommandError(f"--max-active takes a number or 'none', not {text!r}") from None


class Command(RecordsCommand):
    help = "Issue an API token for a client (shown once), or revoke one with --revoke."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="who the token is for, e.g. curio-east")
        parser.add_argument("--revoke", action="store_true", help="revoke the token of that name instead")
        parser.add_argument("--operator", action="store_true",
                            help="an operator token: sees every client's jobs and /status "
                                 "(default: a client token, which sees only the jobs it submits)")
        parser.add_argument("--max-priority", choices=list(PRIORITY_NAMES),
                            help="the highest priority the token may ask for (default: normal for a client, "
                                 "critical for an operator)")
        parser.add_argument("--max-active", metavar="N|none",
                            help="queued plus running jobs the token may hold at once (default: 64 for a client, "
                                 "none for an operator)")

        parser.add_argument("--callback-url", metavar="URL",
                            help="where the token's jobs report their end unless a job names its own URL")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            if opts["revoke"]:
                record = revoke_token(opts["name"])
                self.stdout.write(f"revoked {record.name} ({record.prefix}…) at {record.revoked_at:%Y-%m-%d %H:%M:%S}")
                return
            priority = PRIORITY_NAMES[opts["max_priority"]] if opts["max_priority"] else None
            active: int | None | ScopeDefault = (SCOPE_DEFAULT if opts["max_active"] is None
                                                 else _active_cap(opts["max_active"]))
            record, token = issue_token(opts["name"], TokenScope.OPERATOR if opts["operator"] else TokenScope.CLIENT,
                                        max_priority=priority, max_active_jobs=active,
                                        callback_url=callback_url_of(opts["callback_url"]))
        except TokenError as exc:
            raise CommandError(str(exc)) from None
        except SubmissionRefused as exc:
            raise CommandError(f"--callback-url: {exc.message}") from None
        # The token alone on stdout, so `TOKEN=$(manage.py createtoken x)` works; the note on stderr.
        self.stdout.write(token)
        self.stderr.write(f"{record.scope} token for {record.name}: store it now, it is not shown again")
