#!/usr/bin/env bash
# Learning parity: both sides, one run after the other (one thread each), seeds 0..2, on
# the dumped batches. Usage (from this folder):
#   PY=<taylorformer venv python> REF=<reference venv python> [KERNEL=...] [DATA=...] [OUT=...] \
#     bash run_learning.sh [STEPS] [EVAL_EVERY] [SEEDS]
# KERNEL: the data's tag, eq (default), matern52, periodic or eq-noise0 (README.md); DATA:
# default data/gp-$KERNEL-seed0-2000-b8-n40.npz (the learning runs' size, README.md);
# OUT: default results. Writes one JSON line per
# evaluation to $OUT/learning-<side>-seed<S>-<STEPS>.jsonl for eq, and to
# $OUT/learning-<side>-<KERNEL>-seed<S>-<STEPS>.jsonl otherwise (a file that exists is not
# overwritten).
set -euo pipefail
STEPS=${1:-2000}; EVERY=${2:-500}; SEEDS=${3:-"0 1 2"}
PY=${PY:-python}; REF=${REF:-$HOME/.cache/ref-taylorformer/bin/python}
KERNEL=${KERNEL:-eq}; DATA=${DATA:-data/gp-$KERNEL-seed0-2000-b8-n40.npz}; OUT=${OUT:-results}
if [ "$KERNEL" = eq ]; then TAG=""; else TAG="-$KERNEL"; fi
export TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1  # both TF versions honour these
mkdir -p "$OUT"
for s in $SEEDS; do
  for side in ours ref; do
    f="$OUT/learning-$side$TAG-seed$s-$STEPS.jsonl"
    if [ -e "$f" ]; then echo "exists, skipped: $f" >&2; continue; fi
    if [ "$side" = ours ]; then cmd=("$PY" train_ours.py); else cmd=("$REF" train_ref.py); fi
    nice -n 5 "${cmd[@]}" --data "$DATA" --steps "$STEPS" --eval-every "$EVERY" --seed "$s" \
      2>"${f%.jsonl}.log" > "$f.part"
    mv "$f.part" "$f"
    tail -n 1 "$f"
  done
done
