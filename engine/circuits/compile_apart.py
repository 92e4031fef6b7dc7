"""python -m engine.circuits.compile_apart <kind> <scale> <cache dir>

Compiles one built-in shape's matrices and witness program into the disk cache and exits, so
the compile's peak (several times the matrices, engine.circuits.compiled) is given back to the
system with the process. A synthesis process runs it when the cache lacks a shape it is about to use.
"""

from __future__ import annotations

import sys

from engine.circuits.compiled import compile_shape, store_cached, use_disk_cache
from engine.circuits.kinds import circuit_for


def main(argv: list[str]) -> int:
    kind, scale, cache_dir = argv
    use_disk_cache(cache_dir)
    shape = circuit_for(kind, scale)
    store_cached(shape, compile_shape(shape))  # a cache it cannot write: the caller compiles in place
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
