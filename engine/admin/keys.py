"""Operators' key requests in the admin: what was asked (API, console chips, ``manage.py keys``),
of which host, and how it ended, read-only.

The rows are written by engine.ledger.key_requests (``ask``) and finished by the host that
carries them out, or failed when it stops; the admin only lists them, so it offers no add,
change or delete.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from engine.models import KeyRequest


@admin.register(KeyRequest)
class KeyRequestAdmin(admin.ModelAdmin):
    list_display = ("circuit_id", "host", "action", "tier", "state", "reason", "requested_by", "created_at",
                    "finished_at")
    list_filter = ("state", "action", "host")
    search_fields = ("circuit_id",)
    list_select_related = ("host",)
    date_hierarchy = "created_at"
    ordering = ("-id",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
