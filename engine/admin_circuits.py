"""Registered circom circuits in the admin: read-only, since the files on disk are the truth."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from engine.models import Circuit


@admin.register(Circuit)
class CircuitAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "curve", "n_public", "n_vars", "domain_size", "zkey_bytes", "owner", "created_at")
    list_filter = ("curve",)
    search_fields = ("id", "name")
    readonly_fields = tuple(f.name for f in Circuit._meta.fields)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # registered through POST /api/v1/circuits, which validates the zkey

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # the row describes files on disk: a view, with no Save buttons
