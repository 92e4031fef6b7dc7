#!/usr/bin/env bash
# GPU check (issue 31): on a machine with an NVIDIA GPU and CuPy, in one go and within about
# 7 minutes: the GPU tests; bench/gpu_bench.py (whole proofs of the snarkjs fixtures and of
# every kind byte-identical with the CPU's and verified, MSM G1/G2 at 2^16/2^20/2^22 with
# random and witness-like scalars, NTT, pinned transfers, synthetic Groth16 up to 2^20); then
# bench/engine.py, the engine with 2 workers on the device, split proving on against off, and
# batched proving (4 partitions of a key per launch: one batched MSM launch sequence per kind)
# against one by one, in proofs/min.
# Results (JSON, markdown, logs) go to $GPU_CHECK_OUT (default bench/results).
# Without a GPU it says so and exits 2.
#   bench/gpu_check.sh [--quick]     (--quick: smaller sizes, for a first try)
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
OUT=${GPU_CHECK_OUT:-bench/results}
QUICK=""
[ "${1:-}" = "--quick" ] && QUICK="--quick"

reason=$("$PY" - <<'PYEOF'
from engine.prover.backends.cuda import gpu_available, gpu_unavailable_reason
print("" if gpu_available() else (gpu_unavailable_reason() or "no GPU"))
PYEOF
)
if [ -n "$reason" ]; then
    echo "gpu_check: no GPU on this machine ($reason); nothing was run." >&2
    exit 2
fi

mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$OUT/nvidia-smi.txt"
echo "== kernels build (NVRTC, cached after the first time)"
timeout 120 "$PY" -c "from engine.prover.backends.cuda import get_device; d = get_device(0); print(d.name(), d.arch)" || {
    echo "gpu_check: kernel build/load failed" >&2; exit 1; }

echo "== pytest: the GPU's algorithms on the device and on the emulated grid"
timeout 150 "$PY" -m pytest tests/prover/test_gpu_kernels.py tests/prover/test_gpu_batch.py tests/prover/test_groth16.py -k "cuda or emulated or batch" -q -p no:cacheprovider \
    --timeout 60 -rfE 2>&1 | tee "$OUT/gpu_tests.log" | tail -25
tests_rc=${PIPESTATUS[0]}
if [ "$tests_rc" -ne 0 ]; then  # a device that answers wrong has no figures worth the time
    echo "gpu_check: the GPU tests failed (rc=$tests_rc); no benchmarks were run" >&2
    exit 1
fi

echo "== bench/gpu_bench.py"
timeout 300 "$PY" bench/gpu_bench.py --out "$OUT" --deadline 170 $QUICK 2>&1 | tee "$OUT/gpu_bench.log" | grep -v DEVELOPMENT
bench_rc=${PIPESTATUS[0]}

echo "== bench/engine.py: 2 workers on cuda:0, split proving on and off"
scales=medium
[ -n "$QUICK" ] && scales=small
# the device's own utilization, sampled beside the run, read over each proving window
nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader -lms 100 > "$OUT/gpu_util.csv" 2>&1 &
sampler=$!
PROVINGSITE_PARAMS_DIR="$(mktemp -d)" timeout 150 "$PY" bench/engine.py --scales "$scales" --jobs 3 --devices cuda:0 \
    --workers 2 --synthesis 14 --budget 32GiB 2>&1 | grep -v DEVELOPMENT | tee "$OUT/engine.txt"
engine_rc=${PIPESTATUS[0]}
kill "$sampler" 2>/dev/null
"$PY" bench/gpu_util.py "$OUT/gpu_util.csv" "$OUT/engine.txt" | tee -a "$OUT/engine.txt"

echo "== bench/engine.py --batch: the same engine, 4 partitions a launch against one by one"
PROVINGSITE_PARAMS_DIR="$(mktemp -d)" timeout 150 "$PY" bench/engine.py --scales "$scales" --jobs 3 --devices cuda:0 \
    --workers 2 --synthesis 14 --budget 32GiB --latency-jobs 0 --batch 1 4 2>&1 | grep -v DEVELOPMENT \
    | tee "$OUT/engine_batch.txt"
batch_rc=${PIPESTATUS[0]}

echo "gpu_check: tests rc=$tests_rc, bench rc=$bench_rc, engine rc=$engine_rc, batch rc=$batch_rc; results in $OUT"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ] && [ "$engine_rc" -eq 0 ] && [ "$batch_rc" -eq 0 ]
