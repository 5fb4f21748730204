#!/usr/bin/env bash
# The same learning: ours and the reference on the same dumped batches (README.md).
#   SIDE=ours|ref MODELS="np anp" SEEDS="0 1" STEPS=2000 [OBJECTIVE=iwae TRAIN_SAMPLES=4] [PAIRED=1] ./run_learning.sh
# appends one JSON line per evaluation to results/learning.jsonl; one thread per process, nice 5.
# PAIRED=1: both sides start from the same weights (ours exports data/init-MODEL-SEED.npz, the
# reference loads it: run the ours side first) and write results/learning-paired.jsonl.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
SIDE=${SIDE:-ours}
MODELS=${MODELS:-"np anp"}
SEEDS=${SEEDS:-"0 1"}
STEPS=${STEPS:-2000}
DATA=${DATA:-data/gp-np-$STEPS.npz}
OBJECTIVE=${OBJECTIVE:-iwae}
TRAIN_SAMPLES=${TRAIN_SAMPLES:-4}
PAIRED=${PAIRED:-0}
OUT=results/learning.jsonl
[ "$PAIRED" = 1 ] && OUT=results/learning-paired.jsonl
OURS_PYTHON=${OURS_PYTHON:-$HERE/../../../.tox/tf221/bin/python}
REF_VENV=${REF_VENV:-$HOME/.cache/ref-torch}
export TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 OMP_NUM_THREADS=1 TF_CPP_MIN_LOG_LEVEL=2
mkdir -p results
[ -f "$DATA" ] || "$OURS_PYTHON" dump_data.py --steps "$STEPS" --out "$DATA"
for model in $MODELS; do
  for seed in $SEEDS; do
    init=data/init-$model-$seed.npz
    if [ "$SIDE" = ours ]; then
      extra=(); [ "$PAIRED" = 1 ] && extra=(--export-init "$init")
      nice -n 5 "$OURS_PYTHON" train_ours.py --data "$DATA" --model "$model" --seed "$seed" --steps "$STEPS" \
        --objective "$OBJECTIVE" --train-samples "$TRAIN_SAMPLES" "${extra[@]}" 2>/dev/null | tee -a "$OUT"
    else
      extra=(); [ "$PAIRED" = 1 ] && extra=(--init "$init")
      nice -n 5 "$REF_VENV/bin/python" train_ref.py --data "$DATA" --model "$model" --seed "$seed" --steps "$STEPS" \
        --train-samples "$TRAIN_SAMPLES" "${extra[@]}" | tee -a "$OUT"
    fi
  done
done
