"""An import-linter contract import-linter cannot express by itself: some modules write no rows.

``one_writer`` reads each module of its ``source_modules`` (their packages included) and fails
on a transaction opened (``django.db.transaction``) or on a write call on a model or a
queryset: ``save``, ``delete``, ``create``, ``get_or_create``, ``update_or_create``,
``bulk_create``, ``bulk_update``, ``select_for_update`` (``delete`` without arguments: a
cache's ``delete(key)`` is no row), and ``update`` on a queryset (a call
chain through ``objects``, ``filter``, ``exclude`` or a parameter named ``queryset``). The
ledger is the only writer of rows; the web maps its answers. Used from pyproject.toml.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output

WRITES = frozenset({"save", "delete", "create", "get_or_create", "update_or_create", "bulk_create", "bulk_update",
                    "select_for_update"})
QUERYSET_HINTS = frozenset({"objects", "filter", "exclude", "all", "queryset"})


@dataclass(frozen=True)
class Write:
    module: str
    line: int
    what: str


def _names_in_chain(node: ast.expr) -> set[str]:
    """Every attribute and name the receiver of a call goes through: a.objects.filter(...) → {a, objects, filter}."""
    names: set[str] = set()
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            names.add(node.id)
            return names
        else:
            return names


def writes_in(source: str, module: str) -> list[Write]:
    """The transactions and row writes in one module's source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in ("django.db", "django.db.transaction"):
            if node.module == "django.db.transaction" or any(a.name == "transaction" for a in node.names):
                found.append(Write(module, node.lineno, "imports django.db.transaction"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            receiver = _names_in_chain(node.func.value)
            if name in WRITES - {"delete"} or name == "delete" and not node.args:  # a cache's delete(key) is no row
                found.append(Write(module, node.lineno, f".{name}()"))
            elif name == "update" and receiver & QUERYSET_HINTS:
                found.append(Write(module, node.lineno, "a queryset's .update()"))
    return found


def _source_of(module: str) -> str | None:
    # By path, not by import: importing the web would need Django configured.
    base = Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path.read_text()
    return None


class OneWriterContract(Contract):
    """The modules of ``source_modules`` open no transaction and write no row."""

    source_modules = fields.ListField(subfield=fields.ModuleField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        writes: list[Write] = []
        # import-linter types the class attribute as its field; Contract sets the parsed value in its place
        for root in self.source_modules:  # type: ignore[attr-defined]
            for module in sorted({root.name, *graph.find_descendants(root.name)}):
                source = _source_of(module)
                if source is not None:
                    writes += writes_in(source, module)
        return ContractCheck(kept=not writes, metadata={"writes": writes})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for write in check.metadata["writes"]:
            output.print_error(f"{write.module}:{write.line} {write.what}: write through engine.ledger instead",
                               bold=False)
