#!/usr/bin/env bash
# Prepare a lent GPU machine's run of bench/gpu_check.sh, here, before asking for the machine.
# The machine has CUDA, CuPy, numpy and pytest in its own Python 3.12 but nothing else of ours,
# no network, and takes 64 MiB of carried files: this packs the rest of .venv's packages
# (xz: ~16 MB), prebuilds every kernel into .cache (CPU variants, the sm_90 cubin, the host
# emulation) and writes .devpack/check.sh, the one command to run there:
#
#   bench/gpu_pack.sh            then, through the device tool:
#   run  command: bash .devpack/check.sh     carry: [".devpack", ".cache"]
#   (or bash .devpack/sweep.sh: the engine's sweep of synthesis, pacing and batching)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "gpu_pack: run bin/setup --test first" >&2; exit 2; }
SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/site" "$WORK/lib" .devpack

echo "==> packing .venv's packages, less what the machine's image has or the check never loads"
rsync -a --exclude __pycache__ --exclude tests --exclude '*.pyi' \
    --exclude 'numpy*' --exclude 'cupy*' --exclude 'nvidia*' --exclude 'cuda*' --exclude 'playwright*' \
    --exclude 'pip*' --exclude '_pytest' --exclude 'pytest' --exclude 'pytest-*' --exclude 'py.py' \
    --exclude 'pluggy*' --exclude 'iniconfig*' --exclude 'pygments*' --exclude 'hypothesis*' \
    --exclude 'schemathesis*' --exclude 'jsonschema_rs*' --exclude 'graphql*' --exclude 'ruff*' \
    --exclude 'import_linter*' --exclude 'importlinter' --exclude 'grimp*' --exclude 'greenlet*' \
    --exclude 'cytoolz*' --exclude 'psycopg_binary*' --exclude 'locale' \
    --exclude 'django/contrib/gis' --exclude 'django/contrib/admin/static' --exclude 'ninja/static' \
    "$SITE/" "$WORK/site/"
# Django needs its English catalogue and the locale package itself
mkdir -p "$WORK/site/django/conf/locale"
cp "$SITE/django/conf/locale/__init__.py" "$WORK/site/django/conf/locale/"
cp -r "$SITE/django/conf/locale/en" "$WORK/site/django/conf/locale/"
# pytest plugins whose packages stay behind would break the machine's pytest at start
for ep in "$WORK"/site/*.dist-info/entry_points.txt; do
    grep -q pytest11 "$ep" || continue
    case "$(basename "$(dirname "$ep")")" in pytest_django*|pytest_timeout*) ;; *) rm -rf "$(dirname "$ep")" ;; esac
done
cp "$(gcc -print-file-name=libgomp.so.1)" "$WORK/lib/"
tar -C "$WORK" -cJf .devpack/site.tar.xz site lib

echo "==> prebuilding the kernels into .cache"
.venv/bin/python - <<'PYEOF'
from engine.prover.backends import cuda
from engine.prover.backends.cpu import native_build
from tests.prover import grid_emu
for isa in native_build.ISA_FLAGS:
    native_build.build_isa(isa)
cuda.compile_for_arch("sm_90")
grid_emu.build()
PYEOF

cat > .devpack/check.sh <<'EOF'
#!/usr/bin/env bash
# On the lent machine: unpack the packages beside the image's CuPy and numpy, then the check.
cd "$(dirname "$0")/.."
mkdir -p /tmp/ds && tar -C /tmp/ds -xJf .devpack/site.tar.xz
export PYTHONPATH=$PWD:/tmp/ds/site LD_LIBRARY_PATH=/tmp/ds/lib:${LD_LIBRARY_PATH:-} PYTHON=python3 PYTHONUNBUFFERED=1
GPU_CHECK_OUT=${OUT:-bench/results} bash bench/gpu_check.sh "$@"
EOF
cat > .devpack/sweep.sh <<'EOF2'
#!/usr/bin/env bash
# On the lent machine: the same packages, then the engine's sweep (bench/gpu_sweep.sh).
cd "$(dirname "$0")/.."
mkdir -p /tmp/ds && tar -C /tmp/ds -xJf .devpack/site.tar.xz
export PYTHONPATH=$PWD:/tmp/ds/site LD_LIBRARY_PATH=/tmp/ds/lib:${LD_LIBRARY_PATH:-} PYTHON=python3 PYTHONUNBUFFERED=1
GPU_CHECK_OUT=${OUT:-bench/results} bash bench/gpu_sweep.sh "$@"
EOF2
echo "==> ready: $(du -sh .devpack | cut -f1) in .devpack, $(du -sh .cache | cut -f1) in .cache (64 MiB may travel)"
