#!/usr/bin/env bash
# Table 5 budget-matched runs, one after another: for each model (te-tnp, tnp-d, cnp) and
# seed, taylorformer's row model and the authors' model on the same dumped batches, each
# scored at the six test shifts (results/<model>-<side>-seed<S>.json); README.md has the table.
#   PY      taylorformer interpreter (default: the repo's .tox/tf221, else .venv)
#   REF     reference interpreter    (default: $REF_VENV/bin/python, REF_VENV=$HOME/.cache/ref-torch)
#   MODELS, SIDES, SEEDS, STEPS override the defaults ("te-tnp tnp-d cnp", "ours authors", "0 1 2", 2000)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
ROOT=$HERE/../../..
PY=${PY:-$([ -x "$ROOT/.tox/tf221/bin/python" ] && echo "$ROOT/.tox/tf221/bin/python" || echo "$ROOT/.venv/bin/python")}
REF=${REF:-${REF_VENV:-$HOME/.cache/ref-torch}/bin/python}
MODELS=${MODELS:-"te-tnp tnp-d cnp"}; SIDES=${SIDES:-"ours authors"}; SEEDS=${SEEDS:-"0 1 2"}
STEPS=${STEPS:-2000}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 TF_NUM_INTRAOP_THREADS=1 \
  TF_NUM_INTEROP_THREADS=1 TF_CPP_MIN_LOG_LEVEL=2
nice -n 5 "$PY" dump_shifts.py > /dev/null    # data/ and results/exact-gp.json (kept when present)
for model in $MODELS; do
  for side in $SIDES; do
    for seed in $SEEDS; do
      case $side in
        ours) nice -n 5 "$PY" train_ours.py --model "$model" --seed "$seed" --steps "$STEPS" ;;
        authors) nice -n 5 "$REF" train_authors.py --model "$model" --seed "$seed" --steps "$STEPS" ;;
        *) echo "unknown side $side" >&2; exit 2 ;;
      esac
      echo "$(date -u +%H:%M:%S) $model $side seed $seed done"
    done
  done
done
