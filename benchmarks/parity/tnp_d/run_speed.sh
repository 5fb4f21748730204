#!/usr/bin/env bash
# Like-for-like speed of TNP-D: taylorformer's tnp-d against the reference built with
# --like-ours (the same function and parameter count), one thread each, the same dumped
# batches. The sides alternate run by run (ours, ref, ours, ref, ...), so a change of load
# from other jobs falls on both and the ratio gets a spread over ROUNDS pairs. Each run's
# final JSON line goes to $OUT/<part>.jsonl with the load average before and after it
# (/proc/loadavg: 1, 5, 15 min); summarise_speed.py prints the ratios.
#   PY      taylorformer interpreter (default: the repo's .venv)
#   REF     reference interpreter    (default: $REF_VENV/bin/python, REF_VENV=$HOME/.cache/ref-torch)
#   ROUNDS  pairs per measurement (default 3); STEPS training steps per run (default 300)
#   REPS    timed forward calls per run (default 3); PARTS (default "train forward")
#   XLA=1   also time infer_ours.py --xla in each forward round (a third side)
#   ORDER   "ours ref" (default) or "ref ours": which side runs first in each round
#   START   number of the first round (default 1; to add rounds to a file)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
PY=${PY:-$HERE/../../../.venv/bin/python}
REF=${REF:-${REF_VENV:-$HOME/.cache/ref-torch}/bin/python}
ORDER=${ORDER:-"ours ref"}; START=${START:-1}
ROUNDS=${ROUNDS:-3}; STEPS=${STEPS:-300}; REPS=${REPS:-3}; PARTS=${PARTS:-"train forward"}
OUT=${OUT:-results/speed-like-ours}
DATA=data/gp-seed0-2000.npz
[ -f "$DATA" ] || "$PY" dump_data.py --steps 2000 --out "$DATA"
mkdir -p "$OUT"

load() { cut -d' ' -f1-3 /proc/loadavg; }
record() {  # record FILE ROUND SIDE CMD...: run CMD, append {round, side, load_before, load_after, result}
  local file=$1 round=$2 side=$3 before after line
  shift 3
  before=$(load)
  line=$("$@" | tail -1)
  after=$(load)
  printf '{"round": %d, "side": "%s", "load_before": "%s", "load_after": "%s", "result": %s}\n' \
    "$round" "$side" "$before" "$after" "$line" >> "$file"
  echo "$(date -u +%H:%M:%S) $file round $round $side load $before -> $after: $(echo "$line" | cut -c1-160)"
}

for part in $PARTS; do
  for round in $(seq "$START" $((START + ROUNDS - 1))); do
    for side in $ORDER; do
      case $part/$side in
        train/ours)
          record "$OUT/train.jsonl" "$round" ours \
            "$PY" train_ours.py --data "$DATA" --steps "$STEPS" --threads 1 ;;
        train/ref)
          record "$OUT/train.jsonl" "$round" ref-like-ours \
            "$REF" train_ref.py --data "$DATA" --steps "$STEPS" --threads 1 --like-ours ;;
        forward/ours)
          for size in "--nc 64 --nt 128" "--n 1000"; do
            # shellcheck disable=SC2086
            record "$OUT/forward.jsonl" "$round" ours "$PY" infer_ours.py $size --reps "$REPS" --threads 1
            if [ "${XLA:-0}" = 1 ]; then
              # shellcheck disable=SC2086
              record "$OUT/forward.jsonl" "$round" ours-xla \
                "$PY" infer_ours.py $size --reps "$REPS" --threads 1 --xla
            fi
          done ;;
        forward/ref)
          for size in "--nc 64 --nt 128" "--n 1000"; do
            # shellcheck disable=SC2086
            record "$OUT/forward.jsonl" "$round" ref-like-ours \
              "$REF" infer_ref.py $size --reps "$REPS" --threads 1 --like-ours
          done ;;
      esac
    done
  done
done
