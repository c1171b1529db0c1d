#!/usr/bin/env bash
# The deciding experiments that do not fit the 2-core CPU, run side by side on one GPU.
#
#   run(command="bash benchmarks/gpu_check.sh --run bash benchmarks/gpu_deciding.sh",
#       carry=[".gpu_wheels", ".gpu_data"], timeout_s=590)
#
# Each job is one `lrrich run` or `lrrich sweep` into $OUT/<job>, with its own time cap, all
# ending before DEADLINE seconds; jobs start in priority order, at most MAX_PROCS JAX processes
# at once (a sweep with --jobs J counts J). The device tests (gpu_check.py's tests phase) go
# first. Small models are launch-bound on a GPU, so several processes share the card well.
# A job cut by its cap keeps what it wrote (a sweep's finished points, a run's metrics.jsonl).
# Checkpoints are deleted at the end (they are for --resume, and too large to bring back).
# ONLY=a,b runs those jobs alone (no tests); DRY=1 prints the plan; QUICK=1 runs every job at a tiny size here (JAX_PLATFORMS=cpu).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
OUT=${OUT:-out/gpu_deciding}
DEADLINE=${DEADLINE:-540}
MAX_PROCS=${MAX_PROCS:-20}
PY=${PYTHON:-python3}
FASHION=$PWD/.gpu_data/fashion-mnist
mkdir -p "$OUT"
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 TQDM_DISABLE=1
start=$SECONDS
data=()
[ -d "$FASHION" ] && data=(--set "data_dir=$FASHION")

# name | processes | cap (s) | command (word-split; $OUT/name is appended as --out)
JOBS=(
  "vgg-nobn|3|520|sweep vgg-batchnorm --scale fit --grid batch_norm=false --seeds 3 --jobs 3 --set epochs=1000 --set checkpoint_every=0"
  "vgg-bn|3|300|sweep vgg-batchnorm --scale fit --grid batch_norm=true --seeds 3 --jobs 3 --set epochs=300 --set checkpoint_every=0"
  "weight-decay-fit|1|520|run weight-decay --scale fit ${data[*]}"
  "resnet-past-0.2|3|400|sweep resnet-lr --scale past-0.2 --seeds 3 --jobs 3"
  "cross-entropy-grokking|1|400|run cross-entropy --scale grokking"
  "grokking-transformer|3|450|sweep grokking-transformer --seeds 3 --jobs 3 --set checkpoint_every=0"
  "learning-curve-resnet|3|480|sweep learning-curve --scale resnet --seeds 3 --jobs 3"
  "label-shuffling-conv-wd|1|450|run label-shuffling --scale conv --set weight_decay=0.001"
  "grokking-mlp|3|420|sweep grokking-mlp --seeds 3 --jobs 3 --set checkpoint_every=0"
  "mf-regime|3|420|sweep mf-regime --seeds 3 --jobs 3"
)
if [ "${QUICK:-0}" = 1 ]; then
  export JAX_PLATFORMS=cpu
  JOBS=("resnet-past-0.2|1|120|sweep resnet-lr --scale past-0.2 --seeds 1 --jobs 1 --set epochs=1 --set n_train=256 --set lrs=0.2")
fi

log() { echo "[$((SECONDS - start)) s] $*" | tee -a "$OUT/deciding.log"; }
declare -A PROCS
used=0

if [ "${DRY:-0}" != 1 ] && [ "${QUICK:-0}" != 1 ] && [ -z "${ONLY:-}" ]; then
  log "device tests first (gpu_check.py --phases tests)"
  "$PY" benchmarks/gpu_check.py --phases tests --out "$OUT/check" >"$OUT/check.log" 2>&1 &
  PROCS[$!]=4; used=4
fi
for job in "${JOBS[@]}"; do
  IFS='|' read -r name procs cap cmd <<<"$job"
  if [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]]; then continue; fi
  left=$((DEADLINE - (SECONDS - start)))
  [ "$cap" -gt "$left" ] && cap=$left
  if [ "$cap" -lt 60 ]; then log "skip $name: ${left} s left"; continue; fi
  while :; do  # wait for room
    used=0
    for pid in "${!PROCS[@]}"; do
      if kill -0 "$pid" 2>/dev/null; then used=$((used + PROCS[$pid])); else unset "PROCS[$pid]"; fi
    done
    [ $((used + procs)) -le "$MAX_PROCS" ] && break
    sleep 2
  done
  left=$((DEADLINE - (SECONDS - start)))
  [ "$cap" -gt "$left" ] && cap=$left
  if [ "$cap" -lt 60 ]; then log "skip $name: ${left} s left"; continue; fi
  log "start $name (cap $cap s, $procs procs): lrrich $cmd"
  [ "${DRY:-0}" = 1 ] && continue
  # shellcheck disable=SC2086
  ( t0=$SECONDS
    timeout -k 10 "$cap" "$PY" -m lrrich.cli $cmd --quiet --out "$OUT/$name" \
      >"$OUT/$name.log" 2>&1
    rc=$?
    log "end $name: rc $rc after $((SECONDS - t0)) s" ) &
  PROCS[$!]=$procs
done
wait
pkill -f "lrrich.cli" 2>/dev/null  # a sweep's points outliving their capped parent
find "$OUT" -type d \( -name "checkpoint*" -o -name "ckpt*" \) -prune -exec rm -rf {} + 2>/dev/null
# the device returns at most 8 files: everything but the HTML reports goes back as one archive
(cd "$OUT" && find . -name "report.html" -delete && tar czf /tmp/deciding.tgz --exclude=./deciding.tgz . \
  && mv /tmp/deciding.tgz deciding.tgz)
log "done; $(du -sh "$OUT/deciding.tgz" | cut -f1) archive in $OUT/deciding.tgz"
