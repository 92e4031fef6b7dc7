"""Markup lives in templates: the web's Python modules (console, API, status reader, admin) write
no HTML or SVG in strings (tests/architecture.py reads their string literals)."""

from __future__ import annotations

from pathlib import Path

from tests.architecture import markup_strings_in

REPO = Path(__file__).resolve().parents[2]


def _module(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def _python(*roots: str) -> list[Path]:
    return sorted(p for root in roots for p in (REPO / root).rglob("*.py") if "node_modules" not in p.parts)
# The web's Python: every page, fragment and answer it makes comes from a template.
WEB = ("engine/console", "engine/api", "engine/status", "engine/admin")


def test_no_web_module_writes_markup_in_a_python_string() -> None:
    found = [f"{m.module}:{m.line} {m.text!r}" for path in _python(*WEB)
             for m in markup_strings_in(path.read_text(), _module(path))]
    assert not found, "markup belongs in templates/:\n" + "\n".join(found)


def test_tags_closing_tags_and_attributes_are_markup_and_docstrings_and_placeholders_are_not() -> None:
    source = ('"""The page at /jobs/<id>: a <div> per row."""\n'
              'a = f\'<span class="x">{y}</span>\'\n'
              'b = "<a href=\'/\'>"\n'
              'c = \' hx-swap-oob="true"\'\n'
              'd = "signed t=<unix>,v1=<hex>; 0 < n <= 5"\n'
              'e = "</svg>"\n'
              'def f():\n    """Returns <rect> markup."""\n')
    assert sorted({m.line for m in markup_strings_in(source, "engine.console.example")}) == [2, 3, 4, 6]
