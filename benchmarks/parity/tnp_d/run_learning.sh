#!/usr/bin/env bash
# Learning parity and speed of TNP-D, one run after another (each trainer uses both cores):
# 3 seeds of taylorformer's tnp-d, then 3 of the reference as published, 2000 steps each,
# test log-likelihood every 500 steps. JSON lines go to results/<side>-seed<S>.jsonl.
#   PY   taylorformer interpreter (default: the repo's .venv)
#   REF  reference interpreter    (default: $REF_VENV/bin/python, REF_VENV=$HOME/.cache/ref-torch)
#   THREADS threads per trainer (default 2; 1 on a loaded machine, see README)
#   SEEDS, STEPS, EVERY, SIDES ("ours ref" and/or "like-ours") override the defaults
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
PY=${PY:-$HERE/../../../.venv/bin/python}
REF=${REF:-${REF_VENV:-$HOME/.cache/ref-torch}/bin/python}
THREADS=${THREADS:-2}
SEEDS=${SEEDS:-"0 1 2"}; STEPS=${STEPS:-2000}; EVERY=${EVERY:-500}; SIDES=${SIDES:-"ours ref"}
DATA=data/gp-seed0-2000.npz
[ -f "$DATA" ] || nice -n 5 "$PY" dump_data.py --steps 2000 --out "$DATA"
mkdir -p results
for side in $SIDES; do
  for seed in $SEEDS; do
    out=results/$side-seed$seed.jsonl
    case $side in
      ours) nice -n 5 "$PY" train_ours.py --data "$DATA" --steps "$STEPS" --eval-every "$EVERY" --seed "$seed" --threads "$THREADS" > "$out" ;;
      ref) nice -n 5 "$REF" train_ref.py --data "$DATA" --steps "$STEPS" --eval-every "$EVERY" --seed "$seed" --threads "$THREADS" > "$out" ;;
      like-ours) nice -n 5 "$REF" train_ref.py --data "$DATA" --steps "$STEPS" --eval-every "$EVERY" --seed "$seed" --threads "$THREADS" --like-ours > "$out" ;;
    esac
    echo "$(date -u +%H:%M:%S) $out: $(tail -1 "$out" | cut -c1-200)"
  done
done
