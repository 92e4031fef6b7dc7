"""The device's own busy figure over bench/engine.py's proving windows: the mean of
nvidia-smi's utilization.gpu samples (the share of time a kernel was running) inside each
window that engine.py prints ("gpu window <scale> split <on|off>: <start> <end>").

    nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader -lms 100 > util.csv &
    python bench/engine.py ... > engine.txt
    python bench/gpu_util.py util.csv engine.txt

engine.py's own "device busy" counts the workers' time inside the prover; with split proving a
worker leaves once its kernels are launched, so only the device can say how busy it was.
"""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime
from pathlib import Path

WINDOW = re.compile(r"gpu window (\S+) split (on|off): (\S+) (\S+)")


def samples(path: Path) -> list[tuple[datetime, float]]:
    out = []
    for line in path.read_text().splitlines():
        stamp, _, util = line.partition(",")
        try:
            t = datetime.strptime(stamp.strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=UTC)
            out.append((t, float(util.strip().rstrip("%").strip()) / 100))
        except ValueError:
            continue  # a header or a cut line
    return out


def main(util_csv: str, engine_txt: str) -> int:
    got = samples(Path(util_csv))
    for scale, split, a, b in WINDOW.findall(Path(engine_txt).read_text()):
        start, end = datetime.fromisoformat(a), datetime.fromisoformat(b)
        inside = [u for t, u in got if start <= t <= end]
        mean = sum(inside) / len(inside) if inside else float("nan")
        print(f"{scale} split {split}: device utilization {mean:.3f} (mean of {len(inside)} nvidia-smi samples)")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
