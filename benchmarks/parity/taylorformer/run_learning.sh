#!/usr/bin/env bash
# Learning parity: both sides, one run after the other (each uses both cores), seeds 0..2,
# on the dumped batches. Usage (from this folder):
#   PY=<taylorformer venv python> REF=<reference venv python> bash run_learning.sh [STEPS] [EVAL_EVERY] [SEEDS]
# Appends one JSON line per evaluation to out/learning-<side>-seed<S>-<STEPS>.jsonl.
set -euo pipefail
STEPS=${1:-2000}; EVERY=${2:-500}; SEEDS=${3:-"0 1 2"}
PY=${PY:-python}; REF=${REF:-$HOME/.cache/ref-taylorformer/bin/python}
mkdir -p out
for s in $SEEDS; do
  nice -n 5 "$PY" train_ours.py --steps "$STEPS" --eval-every "$EVERY" --seed "$s" 2>/dev/null \
    | tee "out/learning-ours-seed$s-$STEPS.jsonl"
  nice -n 5 "$REF" train_ref.py --steps "$STEPS" --eval-every "$EVERY" --seed "$s" 2>/dev/null \
    | tee "out/learning-ref-seed$s-$STEPS.jsonl"
done
