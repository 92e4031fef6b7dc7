#!/usr/bin/env bash
# The engine feeding its device (issue 46), on a machine with an NVIDIA GPU and CuPy, in about
# 8 minutes: the host time inside the device's lock per partition, before and after (the real
# device, bench/device_lock.py); the engine's efficiency against a bare loop at medium; then a
# sweep of synthesis processes x pacing x batching (a backlog of porep-c2 jobs at medium, split
# proving on), each run's device busy fraction read from nvidia-smi's own samples over its
# proving window (bench/gpu_util.py). Results go to $GPU_CHECK_OUT (default bench/results).
# Without a GPU it says so and exits 2. Prepared like gpu_check.sh (bench/gpu_pack.sh; there:
# bash .devpack/sweep.sh).
#   bench/gpu_sweep.sh [--quick]     (--quick: scale small, fewer combinations)
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
OUT=${GPU_CHECK_OUT:-bench/results}
scale=medium synthesis=8,14 pace=2,8 batch=1,4
if [ "${1:-}" = "--quick" ]; then scale=small synthesis=14 pace=2,8 batch=1,4; fi

reason=$("$PY" - <<'PYEOF'
from engine.prover.backends.cuda import gpu_available, gpu_unavailable_reason
print("" if gpu_available() else (gpu_unavailable_reason() or "no GPU"))
PYEOF
)
if [ -n "$reason" ]; then
    echo "gpu_sweep: no GPU on this machine ($reason); nothing was run." >&2
    exit 2
fi
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$OUT/nvidia-smi.txt"
export PROVINGSITE_DEV_KEYS=1 PROVINGSITE_PARAMS_DIR="$(mktemp -d)"

echo "== host time inside the device's lock per partition, before and after (cuda:0)"
timeout 120 "$PY" bench/device_lock.py --device cuda:0 --circuit "porep-c2/$scale" --partitions 5 2>&1 \
    | grep -v DEVELOPMENT | tee "$OUT/device_lock.txt"
lock_rc=${PIPESTATUS[0]}

nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader -lms 100 > "$OUT/sweep_util.csv" 2>&1 &
sampler=$!

echo "== the engine's efficiency at $scale on cuda:0 (its defaults) against a bare loop"
timeout 150 "$PY" bench/engine.py --scales "$scale" --devices cuda:0 --budget 64GiB 2>&1 | grep -v DEVELOPMENT \
    | tee "$OUT/engine_efficiency.txt"
eff_rc=${PIPESTATUS[0]}

echo "== sweep: synthesis {$synthesis} x pace {$pace} x batch {$batch}, porep-c2/$scale backlog, split on"
timeout 330 "$PY" bench/engine.py --sweep --scales "$scale" --devices cuda:0 --budget 64GiB --jobs 3 \
    --sweep-synthesis "$synthesis" --sweep-pace "$pace" --sweep-batch "$batch" 2>&1 | grep -v DEVELOPMENT \
    | tee "$OUT/engine_sweep.txt"
sweep_rc=${PIPESTATUS[0]}
kill "$sampler" 2>/dev/null

echo "== the device's busy fraction per run (nvidia-smi over each proving window)"
"$PY" bench/gpu_util.py "$OUT/sweep_util.csv" "$OUT/engine_sweep.txt" | tee -a "$OUT/engine_sweep.txt"

echo "gpu_sweep: lock rc=$lock_rc, efficiency rc=$eff_rc, sweep rc=$sweep_rc; results in $OUT"
[ "$lock_rc" -eq 0 ] && [ "$eff_rc" -eq 0 ] && [ "$sweep_rc" -eq 0 ]
