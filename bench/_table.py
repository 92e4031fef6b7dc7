"""The Markdown tables the benchmarks print (and paste into docs)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """``| a | b |`` lines: the header, the ``|---|`` rule, then one line per row of cells
    already formatted as the caller wants them."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
