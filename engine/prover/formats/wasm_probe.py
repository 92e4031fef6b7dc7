"""python -m engine.prover.formats.wasm_probe: a client's .wasm probed in a child process.

Registering a circuit reads two things from its witness generator: the field it was compiled
for and its input signals (engine.prover.formats.wasm_witness.probe). Both need the module
compiled, and compiling is work the client sizes: a 3.3 MB module once took 21 s of CPU inside
the web process, outside admission control. So the probe runs here, in a process of its own
that limits itself before it reads the module: PROBE_SECONDS of CPU (and of wall-clock time,
which the parent enforces), and an address space of PROBE_MEMORY_BASE plus
PROBE_MEMORY_PER_BYTE for each byte of the module. A module past either limit is refused,
naming the limit; the web process compiles nothing.

The request travels as JSON on stdin, the answer as JSON on stdout; no Django in the child.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.prover.formats.wasm_witness import WitnessError

PROBE_SECONDS = 30.0
# The child's interpreter, numpy and wasmtime take about 150 MiB of address space at rest; an
# unoptimised compile about 15 bytes for each byte of the module (a 27 MB module: 400 MiB).
PROBE_MEMORY_BASE = 512 << 20
PROBE_MEMORY_PER_BYTE = 24
ROOT = Path(__file__).resolve().parents[3]  # where ``engine`` is imported from
OUT_OF_MEMORY = 3  # the child's exit status for a MemoryError
STARTUP_SECONDS = 5.0  # the child's interpreter and imports, on a busy machine, before its CPU limit counts


# numpy's BLAS would start a thread per core at import, each reserving address space the
# limit would count: the child needs none of them.
_ONE_THREAD = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def memory_for(wasm_bytes: int) -> int:
    return PROBE_MEMORY_BASE + PROBE_MEMORY_PER_BYTE * wasm_bytes


def probe_apart(wasm: Path, names: Sequence[str] = (), *, seconds: float | None = None,
                memory: int | None = None) -> dict[str, Any]:
    """wasm_witness.probe of the file at ``wasm`` (``prime``, ``count``, ``signals``), computed in
    a child process within its limits; WitnessError for a module that is no circom witness
    generator or that the child could not probe within them."""
    seconds = PROBE_SECONDS if seconds is None else seconds
    memory = memory_for(wasm.stat().st_size) if memory is None else memory
    request = json.dumps({"wasm": str(wasm), "names": list(names), "seconds": seconds, "memory": memory})
    over_time = WitnessError(None, f"probing it took longer than the limit of {seconds:g} s")
    try:
        done = subprocess.run([sys.executable, "-m", __name__], input=request, cwd=ROOT, env=_ONE_THREAD,
                              capture_output=True, text=True, timeout=seconds + STARTUP_SECONDS, check=False)
    except subprocess.TimeoutExpired:  # a child stopped without using its CPU (its limit is CPU time)
        raise over_time from None
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise over_time
    answer: dict[str, Any] = {}
    if done.returncode == 0:
        try:
            answer = json.loads(done.stdout)
        except ValueError:
            answer = {}
    if "refused" in answer:
        raise WitnessError(None, str(answer["refused"]))
    if "prime" not in answer:
        if done.returncode in (-signal.SIGABRT, OUT_OF_MEMORY):  # an allocation the address-space limit refused
            raise WitnessError(None, f"probing it needed more than the limit of {memory >> 20} MiB of memory")
        raise WitnessError(None, f"probing it failed (exit status {done.returncode})")
    return {"prime": int(answer["prime"]), "count": int(answer["count"]), "signals": answer["signals"]}


def main() -> int:
    from engine.prover.formats.wasm_witness import probe

    request = json.load(sys.stdin)
    cpu = max(1, int(-(-float(request["seconds"]) // 1)))  # whole seconds, rounded up
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU at the soft limit, SIGKILL at the hard one
    memory = int(request["memory"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    try:
        found = probe(Path(request["wasm"]).read_bytes(), request["names"])
    except WitnessError as exc:
        json.dump({"refused": exc.message}, sys.stdout)
        return 0
    except MemoryError:
        return OUT_OF_MEMORY
    json.dump({"prime": str(found["prime"]), "count": found["count"], "signals": found["signals"]}, sys.stdout)
    return 0


__all__ = ["PROBE_MEMORY_BASE", "PROBE_MEMORY_PER_BYTE", "PROBE_SECONDS", "memory_for", "probe_apart"]

if __name__ == "__main__":
    sys.exit(main())
