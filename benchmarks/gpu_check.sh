#!/usr/bin/env bash
# The GPU check of lrrich, run on the GPU machine itself (a workstation, a SLURM GPU node, an
# air-gapped node): device-sensitive tests, ResNet18 vs PyTorch, a vmapped sweep, D_LR at
# n = 10^6, one experiment at full Fashion-MNIST scale. Figures go to OUT/gpu_check.json, the log
# to OUT/gpu_check.log (OUT defaults to out/gpu_check; docs/gpu.md has the goals).
#
#   benchmarks/gpu_check.sh [ARGS...]                 # in the active environment (pip install -e ".[cuda12]")
#   benchmarks/gpu_check.sh --quick [ARGS...]         # every phase tiny, on the CPU (JAX_PLATFORMS=cpu)
#   benchmarks/gpu_check.sh --download-wheels DIR     # with network: wheels for an air-gapped node
#   benchmarks/gpu_check.sh --offline DIR [ARGS...]   # on that node: install from DIR, then check
#   benchmarks/gpu_check.sh --offline DIR --run CMD   # on that node: install from DIR, then CMD
#
# ARGS go to benchmarks/gpu_check.py: --phases resnet_jax,sweep (a subset), --dry-run (the plan),
# --cap-factor 3 (longer phase caps on a slower card), --archive (also pack OUT into OUT.tgz),
# --fashion-mnist DIR (the four Fashion-MNIST IDX files; found by default where Debian's
# dataset-fashion-mnist puts them). PYTHON picks the interpreter (default python3).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
PYTHON=${PYTHON:-python3}
FASHION=${FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
export PYTHONUNBUFFERED=1

data=()  # the experiment phase's Fashion-MNIST when present (else it trains on mnist5k)
[ -f "$FASHION/train-images-idx3-ubyte.gz" ] && data=(--fashion-mnist "$FASHION")

check() {
    exec "$PYTHON" benchmarks/gpu_check.py --out "${OUT:-out/gpu_check}" "${data[@]}" "$@"
}

case "${1:-}" in
--quick)
    shift
    export JAX_PLATFORMS=cpu
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    exec "$PYTHON" benchmarks/gpu_check.py --quick --out "${OUT:-out/gpu_check_quick}" "${data[@]}" "$@"
    ;;
--download-wheels)
    # Every wheel the project needs with CUDA JAX (and PyTorch for the comparison phase), for
    # the Python and platform of the node: set PY_VERSION / PLATFORM when they differ from here.
    dir=${2:?usage: gpu_check.sh --download-wheels DIR}
    py=${PY_VERSION:-$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')}
    plat=${PLATFORM:-manylinux_2_28_x86_64}
    "$PYTHON" -m pip wheel -q --no-deps -w "$dir" . || exit 2  # lrrich itself, then its dependencies
    "$PYTHON" -m pip download -d "$dir" --find-links "$dir" --only-binary=:all: \
        --python-version "$py" --platform "$plat" --platform manylinux2014_x86_64 \
        --platform manylinux_2_17_x86_64 "lrrich[cuda12,dev]" torch "setuptools>=68" wheel || exit 2
    echo "wheels in $dir; copy it and this repository to the node, then:"
    echo "  benchmarks/gpu_check.sh --offline $dir"
    exit 0
    ;;
--offline)
    dir=${2:?usage: gpu_check.sh --offline DIR [ARGS...]}
    shift 2
    "$PYTHON" -m pip install -q --no-index --find-links "$dir" -e ".[cuda12,dev]" || exit 2
    "$PYTHON" -m pip install -q --no-index --find-links "$dir" torch \
        || echo "torch not installed from $dir: the resnet_torch phase will be skipped" >&2
    if [ "${1:-}" = "--run" ]; then
        shift
        exec "$@"
    fi
    check "$@"
    ;;
esac
check "$@"
