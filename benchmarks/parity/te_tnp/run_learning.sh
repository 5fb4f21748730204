#!/usr/bin/env bash
# Learning parity of TE-TNP, one run after another: 3 seeds of taylorformer's te-tnp, then
# 3 of the authors' TE-TNP as published, on the same dumped batches, 2000 steps, test
# log-likelihood every 500 steps. JSON lines go to results/<side>-seed<S>.jsonl.
#   PY       taylorformer interpreter (default: the repo's .venv)
#   REF      reference interpreter    (default: $REF_VENV/bin/python, REF_VENV=$HOME/.cache/ref-torch)
#   SIZES    model sizes, both sides  (default: "--width 64 --layers 2 --heads 4 --head-dim 16 --kernel-width 64")
#   THREADS  threads per trainer      (default 1: on a loaded machine torch's spinning OpenMP
#            threads slow it down many times over; see README)
#   SEEDS, STEPS, EVERY, SIDES override the defaults. Sides: ours (the te-tnp preset), ref (the
#            reference as published: the same architecture), ref-init-keras, ref-scale-softplus,
#            ref-parallel-update, ref-final-norm (the reference with one of ours' earlier choices),
#            like-ours-keras-init and like-ours-scale-parallel (the reference like ours-keras-init
#            and like the preset before issue 35), ours-final-norm (the preset with a final
#            LayerNorm), ours-distinct-layers (each layer drawn on its own), ours-keras-init
#            (Keras init, distinct layers, final LayerNorm), ours-keras-init-no-final-norm,
#            ours-scale-parallel (the preset before issue 35: softplus_of "scale", update_order
#            "parallel", Keras init, final LayerNorm), ours-variance-parallel (the same with the
#            variance link)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
PY=${PY:-$HERE/../../../.venv/bin/python}
REF=${REF:-${REF_VENV:-$HOME/.cache/ref-torch}/bin/python}
SIZES=${SIZES:-"--width 64 --layers 2 --heads 4 --head-dim 16 --kernel-width 64"}
THREADS=${THREADS:-1}
SEEDS=${SEEDS:-"0 1 2"}; STEPS=${STEPS:-2000}; EVERY=${EVERY:-500}; SIDES=${SIDES:-"ours ref"}
DATA=data/gp-te-tnp-small-seed0-2000.npz
[ -f "$DATA" ] || nice -n 5 "$PY" ../tnp_d/dump_data.py --task gp-te-tnp \
  --task-config '{"num_context": [1, 32], "num_target": 32}' --steps 2000 --out "$DATA"
mkdir -p results
for side in $SIDES; do
  for seed in $SEEDS; do
    out=results/$side-seed$seed.jsonl
    common=(--data "$DATA" --steps "$STEPS" --eval-every "$EVERY" --seed "$seed" --threads "$THREADS" $SIZES)
    case $side in
      ours) nice -n 5 "$PY" train_ours.py "${common[@]}" > "$out" ;;
      ref) nice -n 5 "$REF" train_ref.py "${common[@]}" --no-check-shapes > "$out" ;;
      like-ours-keras-init) nice -n 5 "$REF" train_ref.py "${common[@]}" --no-check-shapes --final-norm \
        --init keras > "$out" ;;
      like-ours-scale-parallel) nice -n 5 "$REF" train_ref.py "${common[@]}" --no-check-shapes --final-norm \
        --init keras --scale softplus --parallel-update > "$out" ;;
      ref-init-keras) nice -n 5 "$REF" train_ref.py "${common[@]}" --no-check-shapes --init keras > "$out" ;;
      ref-scale-softplus) nice -n 5 "$REF" train_ref.py "${common[@]}" --no-check-shapes --scale softplus > "$out" ;;
      ref-parallel-update) nice -n 5 "$REF" train_ref.py "${common[@]}" --no-check-shapes --parallel-update > "$out" ;;
      ref-final-norm) nice -n 5 "$REF" train_ref.py "${common[@]}" --no-check-shapes --final-norm > "$out" ;;
      ours-final-norm) nice -n 5 "$PY" train_ours.py "${common[@]}" --final-norm > "$out" ;;
      ours-distinct-layers) nice -n 5 "$PY" train_ours.py "${common[@]}" --distinct-initial-layers > "$out" ;;
      ours-keras-init) nice -n 5 "$PY" train_ours.py "${common[@]}" --init keras --distinct-initial-layers \
        --final-norm > "$out" ;;
      ours-keras-init-no-final-norm) nice -n 5 "$PY" train_ours.py "${common[@]}" --init keras \
        --distinct-initial-layers > "$out" ;;
      ours-scale-parallel|ours-variance-parallel) side_link=${side#ours-}
        nice -n 5 "$PY" train_ours.py "${common[@]}" --softplus-of "${side_link%-parallel}" --init keras \
          --distinct-initial-layers --update-order parallel --final-norm > "$out" ;;
      *) echo "unknown side $side" >&2; exit 2 ;;
    esac
    echo "$(date -u +%H:%M:%S) $out: $(tail -1 "$out" | cut -c1-200)"
  done
done
