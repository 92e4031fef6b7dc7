"""Registered circom circuits as rows: registered, joined by a file sent later, deleted.

A circuit's files live content-addressed under DATA_DIR/circuits/<sha256 of its zkey>/; the
row and its folder come and go together, in the transaction that writes the row.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from engine.models import Circuit, ProofJob
from engine.states import JOB_ACTIVE

# A registered circuit's id: ``circom/<sha256 of its zkey>`` (the engine finds its key by it).
REGISTERED_ID = re.compile(r"^circom/([0-9a-f]{64})$")


def is_registered(circuit_id: str) -> bool:
    return REGISTERED_ID.match(circuit_id or "") is not None


class CircuitInUse(Exception):
    """Active jobs still prove with the circuit (the message names a few of them)."""


def in_use_by(circuit: Circuit) -> str:
    """Why the circuit cannot go (the active jobs proving with it, a few named), or ""."""
    active = ProofJob.objects.filter(circuit_id=circuit.job_circuit_id, state__in=JOB_ACTIVE)
    job_ids = list(active.values_list("job_id", flat=True)[:5])
    return f"jobs still use this circuit: {', '.join(repr(j) for j in job_ids)}" if job_ids else ""


def circuits_dir() -> Path:
    return Path(settings.DATA_DIR) / "circuits"


def register(fields: dict[str, Any], adopt_files: Callable[[], None]) -> Circuit | None:
    """The new circuit's row, its files moved into place by ``adopt_files`` in the same
    transaction; None when the same key was registered at the same moment (the other row won)."""
    try:
        with transaction.atomic():
            circuit = Circuit.objects.create(**fields)
            adopt_files()
    except IntegrityError:
        return None
    return circuit


def add_files(circuit: Circuit, paths_and_sizes: dict[str, Any]) -> None:
    """Files the circuit lacked (a .wasm sent after the zkey, say) recorded on its row."""
    for name, value in paths_and_sizes.items():
        setattr(circuit, name, value)
    if paths_and_sizes:
        circuit.save(update_fields=list(paths_and_sizes))


def delete_unused(circuit_id: str, visible: QuerySet[Circuit]) -> bool:
    """Delete the circuit and its folder unless an active job proves with it (CircuitInUse);
    False when ``visible`` holds no such circuit. The row is locked first, so a job submitted
    at the same moment either holds it (and this refuses) or is refused itself."""
    with transaction.atomic():
        circuit = visible.filter(pk=circuit_id).select_for_update().first()
        if circuit is None:
            return False
        reason = in_use_by(circuit)
        if reason:
            raise CircuitInUse(reason)
        circuit.delete()
    # Done jobs keep their own hard link to the key; the circuit's folder can go.
    shutil.rmtree(circuits_dir() / circuit_id, ignore_errors=True)
    return True


def delete_many(circuits: QuerySet[Circuit]) -> tuple[int, list[str]]:
    """The admin's bulk delete: (how many went, why each refused one stayed)."""
    deleted, refused = 0, []
    for pk in list(circuits.values_list("pk", flat=True)):
        try:
            deleted += delete_unused(pk, Circuit.objects.all())
        except CircuitInUse as exc:
            refused.append(f"{pk[:12]}…: {exc}")
    return deleted, refused
