"""A module's ``_name`` is its own: no module imports another's private name (tests/architecture.py
reads the imports); what another module needs has a public name in the module that owns it."""

from __future__ import annotations

from pathlib import Path

from tests.architecture import private_imports_in

REPO = Path(__file__).resolve().parents[2]


def _module(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def _python(*roots: str) -> list[Path]:
    return sorted(p for root in roots for p in (REPO / root).rglob("*.py") if "node_modules" not in p.parts)


def test_no_module_imports_a_name_another_keeps_private() -> None:
    found = [f"{p.module}:{p.line} imports {p.imported}"
             for path in _python("engine", "provingsite", "tests", "bench")
             for p in private_imports_in(path.read_text(), _module(path))]
    assert not found, "\n".join(found)


def test_an_import_of_another_modules_private_name_is_seen_absolute_or_relative() -> None:
    source = ("from engine.console.views import _require_viewer\n"
              "from .etags import _etag, entity_tag\n"
              "from engine.management.commands._common import gpu_archs\n"
              "from engine.api.jobs import __all__\n")
    found = private_imports_in(source, "engine.api.poll")
    assert [(p.line, p.imported) for p in found] == [(1, "engine.console.views._require_viewer"),
                                                      (2, "engine.api.etags._etag")]
