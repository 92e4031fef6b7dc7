"""The ledger is the only writer of rows: the import-linter contract that keeps the web and the
pipeline from writing (tests/architecture.py) sees the writes it is there to refuse."""

from __future__ import annotations

from tests.architecture import writes_in


def test_a_queryset_update_a_save_and_a_transaction_are_writes() -> None:
    source = ("from django.db import transaction\n"
              "ProofJob.objects.filter(pk=1).update(state='done')\n"
              "job.save(update_fields=['state'])\n"
              "Circuit.objects.create(id='x')\n"
              "queryset.delete()\n")
    assert [w.line for w in writes_in(source, "engine.api.example")] == [1, 2, 3, 4, 5]


def test_a_dict_update_and_a_cache_delete_are_not_writes() -> None:
    source = "context.update(pending=3)\nsent.update(updates)\ncache.delete('key')\nbody.update({'a': 1})\n"
    assert writes_in(source, "engine.console.example") == []
