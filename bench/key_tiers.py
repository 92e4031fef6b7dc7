"""Key residency tiers (engine/pipeline/keycache.py, keymap.py): per circuit, the cold load
(read the key, build its fixed-base tables), the hot → warm demotion (write the image once, map
it), the bytes charged hot and warm, and a proof's time with the hot key and with the warm one
(proved from the map, no tables), median of --repeat, interleaved; every proof verified.

    PROVINGSITE_DEV_KEYS=1 .venv/bin/python bench/key_tiers.py --circuits porep-c2/tiny porep-c2/small
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--circuits", nargs="+", default=["porep-c2/tiny"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "provingsite.settings")
    import django

    django.setup()
    from bench._table import markdown_table
    rows = [measure(c, args.repeat) for c in args.circuits]
    print(markdown_table(["circuit", "cold load s", "hot→warm s", "hot bytes", "warm bytes", "mapped bytes",
                          "prove hot s", "prove warm s", "verified"], rows))


def measure(circuit_id: str, repeat: int) -> list[object]:
    from engine.circuits.kinds import demo_inputs, parse_circuit_id, validate_inputs
    from engine.circuits.synthesis import synthesize_partition
    from engine.pipeline import keys
    from engine.pipeline.keycache import KeyCache, KeyTier
    from engine.pipeline.keymap import map_key
    from engine.pipeline.memory import MemoryManager
    from engine.prover import groth16
    from engine.prover.verify import verify

    shape = parse_circuit_id(circuit_id)
    needs = shape.memory
    images = Path(tempfile.mkdtemp(prefix="bench-keymaps-"))
    cache = KeyCache(MemoryManager(1 << 40), keys.load_proving_key, sizer=keys.held_nbytes,
                     mapper=lambda key, cid: map_key(key, images, cid))
    started = time.perf_counter()
    hot = cache.checkout(circuit_id, int(needs.key_bytes + keys.table_bytes(needs)))
    cold_load = time.perf_counter() - started
    hot_bytes = cache.reserved_bytes(circuit_id)
    cache.check_in(circuit_id)
    started = time.perf_counter()
    cache.demote(circuit_id, KeyTier.WARM)
    demote = time.perf_counter() - started
    warm = cache.checkout(circuit_id, 0)
    (entry,) = cache.snapshot()
    inputs, _ = validate_inputs(shape.kind, demo_inputs(shape.kind))
    assignment = synthesize_partition(circuit_id, inputs, 0)
    times: dict[str, list[float]] = {"hot": [], "warm": []}
    ok = True
    for _ in range(repeat):
        for name, pk in (("hot", hot), ("warm", warm)):
            started = time.perf_counter()
            proof = groth16.prove(pk, assignment)
            times[name].append(time.perf_counter() - started)
            ok = ok and verify(pk.vk, proof, groth16.public_inputs_of(assignment))
    return [circuit_id, f"{cold_load:.3f}", f"{demote:.3f}", hot_bytes, entry["bytes"], entry["mapped_bytes"],
            f"{statistics.median(times['hot']):.3f}", f"{statistics.median(times['warm']):.3f}", ok]


if __name__ == "__main__":
    main()
