"""Registered circom circuits in the admin: read-only, since the files on disk are the truth.
A delete goes through the ledger, which refuses while a job proves with the circuit and
removes its folder with its row."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from engine.format import curve_text
from engine.ledger.circuits import delete_many, in_use_by
from engine.models import Circuit


@admin.register(Circuit)
class CircuitAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "curve_named", "n_public", "n_vars", "domain_size", "zkey_bytes", "owner", "created_at")
    list_filter = ("curve",)
    search_fields = ("id", "name")
    readonly_fields = tuple(f.name for f in Circuit._meta.fields)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # registered through POST /api/v1/circuits, which validates the zkey

    @admin.display(description="curve", ordering="curve")
    def curve_named(self, obj: Circuit) -> str:
        return curve_text(obj.curve)  # as the console names it: BN254 (bn128)

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # the row describes files on disk: a view, with no Save buttons

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, Any, Any, list[Any]]:
        # A circuit an active job proves with is listed as protected: Django refuses and says why.
        deletable, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        in_use = [f"{c.name or c.pk[:12]}: {reason}" for c in objs if (reason := in_use_by(c))]
        return deletable, counts, perms_needed, [*protected, *in_use]

    def delete_model(self, request: HttpRequest, obj: Circuit) -> None:
        self.delete_queryset(request, Circuit.objects.filter(pk=obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Circuit]) -> None:
        _, refused = delete_many(queryset)
        for reason in refused:
            self.message_user(request, f"Not deleted: {reason}", messages.ERROR)
