#!/usr/bin/env bash
# Learning parity of ConvCNP (the reference's GP configuration), one run after another:
# SEEDS of taylorformer's convcnp with convcnp-reference-gp.json (../tnp_d/train_ours.py),
# then SEEDS of the reference (train_ref.py), STEPS steps each on the same dumped gp
# batches, test log-likelihood every EVERY steps. Side "paired": the reference started from
# ours' initial weights of that seed (check_function.py export --seed S writes them).
# JSON lines go to results/learning-<side>-seed<S>.jsonl.
#   PY   taylorformer interpreter (default: the repo's .tox/tf221)
#   REF  reference interpreter    (default: $REF_VENV/bin/python, REF_VENV=$HOME/.cache/ref-torch)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
PY=${PY:-$HERE/../../../.tox/tf221/bin/python}
REF=${REF:-${REF_VENV:-$HOME/.cache/ref-torch}/bin/python}
SEEDS=${SEEDS:-"0 1 2"}; STEPS=${STEPS:-2000}; EVERY=${EVERY:-500}; SIDES=${SIDES:-"ours ref"}
export TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 OMP_NUM_THREADS=1
DATA=data/gp-seed0-2000.npz
[ -f "$DATA" ] || nice -n 5 "$PY" ../tnp_d/dump_data.py --steps 2000 --out "$DATA"
mkdir -p results
for side in $SIDES; do
  for seed in $SEEDS; do
    out=results/learning-$side-seed$seed.jsonl
    case $side in
      ours) nice -n 5 "$PY" ../tnp_d/train_ours.py --data "$DATA" --model convcnp-reference-gp.json \
              --steps "$STEPS" --eval-every "$EVERY" --seed "$seed" --threads 1 2>/dev/null | grep '^{' > "$out" ;;
      ref) nice -n 5 "$REF" train_ref.py --data "$DATA" --steps "$STEPS" --eval-every "$EVERY" \
              --seed "$seed" --threads 1 2>/dev/null | grep '^{' > "$out" ;;
      paired) init=data/init-seed$seed.npz
              nice -n 5 "$PY" check_function.py export --seed "$seed" --data "$init" > /dev/null 2>&1
              nice -n 5 "$REF" train_ref.py --data "$DATA" --steps "$STEPS" --eval-every "$EVERY" \
              --seed "$seed" --threads 1 --init-from "$init" 2>/dev/null | grep '^{' > "$out" ;;
    esac
    echo "$(date -u +%H:%M:%S) $out: $(tail -1 "$out" | cut -c1-200)"
  done
done
