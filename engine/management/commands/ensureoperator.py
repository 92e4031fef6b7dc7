"""Make sure someone can log in to the console on a fresh machine."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import CommandError

from engine.api.auth import OPERATOR_GROUP
from engine.management.commands._common import RecordsCommand


class Command(RecordsCommand):
    help = ("Create a local superuser 'admin' with a random password (printed once) if no superuser exists; "
            "with --operator NAME, a read-only console user in the operator group instead.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--operator", metavar="NAME", help="create NAME, not staff, in the operator group")

    def handle(self, *args: Any, username: str, operator: str | None, **options: Any) -> None:
        if operator:
            self._operator(operator)
            return
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            self.stdout.write("A superuser exists; log in with it (or `manage.py changepassword`).")
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(username=username, email="", password=password)
        self._shown_once(username, password, "superuser")

    def _operator(self, username: str) -> None:
        users = get_user_model()
        if users.objects.filter(username=username).exists():
            raise CommandError(f"user {username!r} exists; add it to the {OPERATOR_GROUP!r} group in the admin")
        try:
            group = Group.objects.get(name=OPERATOR_GROUP)
        except Group.DoesNotExist:
            raise CommandError(f"no {OPERATOR_GROUP!r} group: run `manage.py migrate` first") from None
        password = secrets.token_urlsafe(12)
        users.objects.create_user(username=username, password=password).groups.add(group)
        self._shown_once(username, password, "operator")

    def _shown_once(self, username: str, password: str, role: str) -> None:
        self.stdout.write(self.style.SUCCESS(
            f"Created {role} {username!r} with password {password!r} — shown once, note it now."
        ))
