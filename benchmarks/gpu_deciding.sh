#!/usr/bin/env bash
# The deciding experiments that do not fit a small CPU, run side by side on one GPU.
#
#   benchmarks/gpu_deciding.sh                 # in the active environment (pip install -e ".[cuda12]")
#   DRY=1 benchmarks/gpu_deciding.sh           # print the plan, run nothing
#   ONLY=vgg-nobn,grokking-mlp benchmarks/gpu_deciding.sh   # those jobs alone
#   QUICK=1 benchmarks/gpu_deciding.sh         # one tiny job on the CPU (JAX_PLATFORMS=cpu)
#
# Each job is one `lrrich run` or `lrrich sweep` into $OUT/<job> (OUT defaults to
# out/gpu_deciding), started in priority order with at most MAX_PROCS JAX processes at once (a
# sweep with --jobs J counts J). The device tests (gpu_check.py's tests phase) go first unless
# ONLY is set. Small models are launch-bound on a GPU, so several processes share the card well;
# each allocates memory on demand (XLA_PYTHON_CLIENT_PREALLOCATE=false).
# Options, as environment variables:
#   DEADLINE=SECONDS  stop every job still running after that many seconds (default: none); a job
#                     stopped this way keeps what it wrote (a sweep's finished points, a run's
#                     metrics.jsonl), and the same command continues it later
#   MAX_PROCS=N       JAX processes at once (default 20, measured on an H200 with 141 GB)
#   ARCHIVE=1         also pack $OUT (without checkpoints and HTML reports) into $OUT.tgz
#   FASHION_MNIST=DIR the Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist)
#   PYTHON=python3    the interpreter
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
OUT=${OUT:-out/gpu_deciding}
DEADLINE=${DEADLINE:-}
MAX_PROCS=${MAX_PROCS:-20}
PY=${PYTHON:-python3}
FASHION=${FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
mkdir -p "$OUT"
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 TQDM_DISABLE=1
start=$SECONDS
data=()
[ -f "$FASHION/train-images-idx3-ubyte.gz" ] && data=(--set "data_dir=$FASHION")

# name | processes | command (word-split; --out $OUT/name is appended)
JOBS=(
  "vgg-nobn|3|sweep vgg-batchnorm --scale fit --grid batch_norm=false --seeds 3 --jobs 3 --set epochs=1000"
  "vgg-bn|3|sweep vgg-batchnorm --scale fit --grid batch_norm=true --seeds 3 --jobs 3 --set epochs=300"
  "weight-decay-fit|1|run weight-decay --scale fit ${data[*]}"
  "resnet-past-0.2|3|sweep resnet-lr --scale past-0.2 --seeds 3 --jobs 3"
  "cross-entropy-grokking|1|run cross-entropy --scale grokking"
  "grokking-transformer|3|sweep grokking-transformer --seeds 3 --jobs 3"
  "learning-curve-resnet|3|sweep learning-curve --scale resnet --seeds 3 --jobs 3"
  "label-shuffling-conv-wd|1|run label-shuffling --scale conv --set weight_decay=0.001"
  "grokking-mlp|3|sweep grokking-mlp --seeds 3 --jobs 3"
  "mf-regime|3|sweep mf-regime --seeds 3 --jobs 3"
)
if [ "${QUICK:-0}" = 1 ]; then
  export JAX_PLATFORMS=cpu
  JOBS=("resnet-past-0.2|1|sweep resnet-lr --scale past-0.2 --seeds 1 --jobs 1 --set epochs=1 --set n_train=256 --set lrs=0.2")
fi

log() { echo "[$((SECONDS - start)) s] $*" | tee -a "$OUT/deciding.log"; }
declare -A PROCS NAMES T0  # per job: processes it counts, its name, its start (s)

launch() {  # name procs command...: in its own process group, so DEADLINE stops its workers too
  local name=$1 procs=$2
  shift 2
  setsid "$@" >"$OUT/$name.log" 2>&1 &
  PROCS[$!]=$procs NAMES[$!]=$name T0[$!]=$SECONDS
}

reap() {  # forget ended jobs (logging their exit status); stop all after DEADLINE
  local pid rc
  for pid in "${!PROCS[@]}"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"
      rc=$?
      log "end ${NAMES[$pid]}: rc $rc after $((SECONDS - T0[$pid])) s"
      unset "PROCS[$pid]" "NAMES[$pid]" "T0[$pid]"
    elif [ -n "$DEADLINE" ] && [ $((SECONDS - start)) -ge "$DEADLINE" ]; then
      log "stop ${NAMES[$pid]}: DEADLINE=$DEADLINE s"
      kill -TERM -- "-$pid" 2>/dev/null
    fi
  done
}

used() {
  local n=0 pid
  for pid in "${!PROCS[@]}"; do n=$((n + PROCS[$pid])); done
  echo "$n"
}

if [ "${DRY:-0}" != 1 ] && [ "${QUICK:-0}" != 1 ] && [ -z "${ONLY:-}" ]; then
  log "device tests first (gpu_check.py --phases tests)"
  launch check 4 "$PY" benchmarks/gpu_check.py --phases tests --out "$OUT/check"
fi
for job in "${JOBS[@]}"; do
  IFS='|' read -r name procs cmd <<<"$job"
  if [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]]; then continue; fi
  reap
  while [ $(($(used) + procs)) -gt "$MAX_PROCS" ]; do sleep 2; reap; done
  if [ -n "$DEADLINE" ] && [ $((SECONDS - start)) -ge "$DEADLINE" ]; then
    log "skip $name: past DEADLINE=$DEADLINE s"
    continue
  fi
  log "start $name ($procs procs): lrrich $cmd --out $OUT/$name"
  [ "${DRY:-0}" = 1 ] && continue
  # shellcheck disable=SC2086
  launch "$name" "$procs" "$PY" -m lrrich.cli $cmd --quiet --out "$OUT/$name"
done
while [ "$(used)" -gt 0 ]; do sleep 2; reap; done
if [ "${ARCHIVE:-0}" = 1 ] && [ "${DRY:-0}" != 1 ]; then
  # checkpoints are for --resume on this machine, the HTML reports repeat report.md
  tar czf "$OUT.tgz" --exclude="checkpoint*" --exclude="ckpt*" --exclude="report.html" \
    -C "$(dirname "$OUT")" "$(basename "$OUT")"
  log "packed $OUT into $OUT.tgz ($(du -sh "$OUT.tgz" | cut -f1))"
fi
log "done"
