"""What registering a circuit's .wasm costs the web process: the probe in a child process
(engine.prover.formats.wasm_probe: one unoptimised compile, limited in time and memory) against
the previous path in the same process (two compiles at wasmtime's default optimisation, as
circuit_prime and then input_signals made them in the web request), on a module of code only
(tests/hostile_wasm.bulky) of the size given.

    .venv/bin/python bench/wasm_probe.py [--megabytes 3.3]   # prints a table

Rows: the path, the CPU seconds of the web process and of its children, and the wall time.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import wasmtime

from bench._table import markdown_table
from engine.prover.formats.wasm_probe import probe_apart
from engine.prover.formats.wasm_witness import WitnessError
from tests.hostile_wasm import bulky


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _measured(work: Callable[[], None]) -> tuple[float, float, float]:
    own, children, started = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
    work()
    return (_cpu(resource.RUSAGE_SELF) - own, _cpu(resource.RUSAGE_CHILDREN) - children,
            time.perf_counter() - started)


def run(megabytes: float = 3.3) -> list[tuple[str, float, float, float]]:
    module = bulky(megabytes)

    def in_process() -> None:
        for _ in range(2):
            config = wasmtime.Config()
            config.consume_fuel = True
            wasmtime.Module(wasmtime.Engine(config), module)

    def apart() -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "c.wasm"
            path.write_bytes(module)
            try:
                probe_apart(path)
            except WitnessError:
                pass  # compiled, then found not to be a circom generator: the cost is the compile's

    return [("in the web process (before)", *_measured(in_process)), ("in a child (now)", *_measured(apart))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=3.3)
    args = parser.parse_args()
    rows = run(args.megabytes)
    print(f"a {args.megabytes:g} MB module")
    print(markdown_table(["path", "web process CPU s", "children CPU s", "wall s"],
                         [(name, f"{own:.2f}", f"{children:.2f}", f"{wall:.2f}") for name, own, children, wall in rows]))
    before, now = rows[0][1], rows[1][1] + rows[1][2]
    print(f"CPU per registration, now / before: {now / before:.2f}")


if __name__ == "__main__":
    main()
