"""python -m engine.circuits.compile_apart <kind> <scale> <cache dir> <parent pid>

Compiles one built-in shape's matrices into the disk cache and exits, so the compile's peak
(several times the matrices, engine.circuits.compiled) is given back to the system with the
process. A synthesis process runs it when the cache lacks a shape it is about to use, and the
compile dies with that process: the engine gives back what it reserved for a dead synthesis
process, so an orphaned compile would hold memory that nothing accounts for.
"""

from __future__ import annotations

import os
import sys

from engine.circuits.compiled import compile_shape, store_cached, use_disk_cache
from engine.circuits.kinds import circuit_for


def die_with_parent(parent: int) -> None:
    """Have Linux kill this process when ``parent`` dies (prctl's PR_SET_PDEATHSIG); a parent
    already gone ends it here. Elsewhere nothing: the compile then finishes on its own."""
    if sys.platform != "linux":
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    if ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) != 0:
        return
    if os.getppid() != parent:
        os._exit(1)


def main(argv: list[str]) -> int:
    kind, scale, cache_dir, parent = argv
    die_with_parent(int(parent))
    use_disk_cache(cache_dir)
    shape = circuit_for(kind, scale)
    store_cached(shape, compile_shape(shape))  # a cache it cannot write: the caller compiles in place
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
