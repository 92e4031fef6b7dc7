"""Make sure someone can log in to the console on a fresh machine."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create a local superuser 'admin' with a random password (printed once) if no superuser exists."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            self.stdout.write("A superuser exists; log in with it (or `manage.py changepassword`).")
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(self.style.SUCCESS(
            f"Created superuser {username!r} with password {password!r} — shown once, note it now."
        ))
