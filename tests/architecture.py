"""Rules about the source that import-linter cannot express by itself, read from the files.

``one_writer``, a contract: some modules write no rows. It reads each module of its
``source_modules`` (their packages included) and fails on a transaction opened
(``django.db.transaction``) or on a write call on a model or a queryset: ``save``, ``delete``,
``create``, ``get_or_create``, ``update_or_create``, ``bulk_create``, ``bulk_update``,
``select_for_update`` (``delete`` without arguments: a cache's ``delete(key)`` is no row), and
``update`` on a queryset (a call chain through ``objects``, ``filter``, ``exclude`` or a
parameter named ``queryset``). The ledger is the only writer of rows; the web maps its answers.
Used from pyproject.toml.

``private_imports_in``: a module's ``_name`` is its own; another module that needs it asks for
a public name. ``markup_strings_in``: the web's markup lives in templates, never in Python
strings. Both are checked over the tree by tests/foundation/test_private_names.py and test_markup_in_templates.py.
"""

from __future__ import annotations

import ast
import re
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


# ---- names private to their module ------------------------------------------------------------


@dataclass(frozen=True)
class PrivateImport:
    module: str
    line: int
    imported: str


def private_imports_in(source: str, module: str) -> list[PrivateImport]:
    """``from engine.x import _name`` (or ``from .x import _name``) in ``module``'s source: a name
    its own module keeps to itself, reached from another. A private module's public names
    (``engine.management.commands._common``, Django's convention) are not private names."""
    package = module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        target = node.module or ""
        if node.level:  # a relative import, resolved against the module's package
            base = package.split(".")
            target = ".".join([*base[:len(base) - node.level + 1], *([target] if target else [])])
        if target.split(".")[0] not in ("engine", "provingsite", "tests", "bench") or target == module:
            continue
        found += [PrivateImport(module, node.lineno, f"{target}.{alias.name}") for alias in node.names
                  if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


# ---- markup lives in templates ----------------------------------------------------------------

# Elements a page or an SVG is made of, opened (``<span``, ``<a ``) or closed (``</``), and the
# attributes that make a string markup even without its tag (``class="``, ``hx-swap-oob="``).
HTML_TAGS = ("a abbr b br button caption circle code dd details div dl dt em figure footer form g h1 h2 h3 h4 h5 h6 "
             "header i img input label li line link main meta nav ol option p path polyline pre rect script "
             "section select small span strong style summary svg table tbody td text textarea tfoot th thead time "
             "title tr ul").split()
MARKUP = re.compile(r"<(?:" + "|".join(HTML_TAGS) + r")(?=[\s>/])|</[a-zA-Z]|"
                    r"(?:\s|^)(?:class|id|href|style|role|title|data-[\w-]+|hx-[\w-]+|aria-[\w-]+)=[\"']")


@dataclass(frozen=True)
class MarkupString:
    module: str
    line: int
    text: str


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the module's, classes' and functions' docstrings: prose, not output."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def markup_strings_in(source: str, module: str) -> list[MarkupString]:
    """String literals (f-strings' pieces included) in ``module``'s source that hold HTML or SVG
    markup: a tag, a closing tag, or an attribute written out."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose \
                and MARKUP.search(node.value):
            found.append(MarkupString(module, node.lineno, node.value[:60]))
    return found
