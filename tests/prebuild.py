"""Compile the native builds the suite loads before it needs them, beside the linters.

    .venv/bin/python -m tests.prebuild

bin/test starts this in the background before ruff, import-linter and mypy: on a fresh clone
(CI's) the CPU kernels this machine selects, the other instruction-set variant that
tests/prover/test_native_isa.py compares them with, and the emulated GPU grid were otherwise
compiled inside the first tests that load them, one after another, for about two and a half
minutes on a 2-core machine. Each build takes its own file lock, so a test that needs one
still being compiled waits for it, and one already in the cache is only loaded. A failed build
is left for the test that loads it to report.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor


def builds() -> list[tuple[str, Callable[[], object]]]:
    """(name, build) in the order the suite first needs them."""
    from engine.prover.backends.cpu import native_build
    from tests.prover import grid_emu

    selected = native_build.select_isa()
    others = [isa for isa in sorted(native_build.ISA_FLAGS) if isa != selected and native_build.cpu_supports(isa)]
    out: list[tuple[str, Callable[[], object]]] = [
        (f"CPU kernels ({isa})", functools.partial(native_build.build_isa, isa)) for isa in (selected, *others)]
    out.append(("emulated GPU grid", grid_emu.build))
    return out


def _timed(name: str, build: Callable[[], object]) -> str:
    started = time.monotonic()
    try:
        build()
    except Exception as exc:  # noqa: BLE001 - reported, and left for the tests to meet
        return f"{name}: failed ({type(exc).__name__}: {str(exc)[:200]})"
    return f"{name}: ready in {time.monotonic() - started:.0f}s"


def main() -> int:
    # The compiler runs in child processes: two at a time keep both cores of a small machine busy.
    with ThreadPoolExecutor(max_workers=2) as pool:
        for line in pool.map(lambda entry: _timed(*entry), builds()):
            print(f"prebuild: {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
