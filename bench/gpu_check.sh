#!/usr/bin/env bash
# GPU check (issue 9): on a machine with an NVIDIA GPU and CuPy, run the GPU tests, then the
# GPU benchmarks (bench/gpu_bench.py: MSM, NTT, transfers, whole proofs against the CPU prover),
# writing JSON + a markdown table under bench/results/.
# Without a GPU it says so and exits 2. Budget: about 8 minutes in total.
#   bench/gpu_check.sh [--quick]     (--quick: smaller sizes, for a first try)
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
OUT=${GPU_CHECK_OUT:-bench/results}

reason=$("$PY" - <<'PYEOF'
from engine.prover.gpu import gpu_available, gpu_unavailable_reason
print("" if gpu_available() else (gpu_unavailable_reason() or "no GPU"))
PYEOF
)
if [ -n "$reason" ]; then
    echo "gpu_check: no GPU on this machine ($reason); nothing was run." >&2
    exit 2
fi

start=$(date +%s)
mkdir -p "$OUT"
echo "== kernels build (NVRTC, cached after the first time)"
timeout 300 "$PY" -c "from engine.prover.gpu import get_device; d = get_device(0); print(d.name(), d.arch)" || {
    echo "gpu_check: kernel build/load failed" >&2; exit 1; }

echo "== pytest -m gpu"
timeout 240 "$PY" -m pytest -m gpu tests/prover -q -p no:cacheprovider
tests_rc=$?

left=$(( 480 - ($(date +%s) - start) ))
[ "$left" -lt 60 ] && left=60
echo "== benchmarks (limit ${left}s)"
timeout "$left" "$PY" bench/gpu_bench.py --out "$OUT" "$@"
bench_rc=$?

echo "gpu_check: tests rc=$tests_rc, bench rc=$bench_rc; results in $OUT"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
