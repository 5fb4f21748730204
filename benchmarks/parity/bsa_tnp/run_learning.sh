#!/usr/bin/env bash
# Learning parity: taylorformer bsa-tnp vs the authors' BSA-TNP on the dumped batches,
# seeds one after another, the two sides alternating (ours s0, ref s0, ours s1, ...), each
# run under `nice -n 5`. JSON lines of every run go to results/learning-<date>.jsonl.
#
#   OURS_PY=../../../.venv/bin/python bash run_learning.sh            # seeds 0 1 2, 2000 steps
#   SEEDS="1 2" STEPS=2000 bash run_learning.sh                       # the rest of a cut-off run
#   REF_ARGS="--like-ours" bash run_learning.sh                       # the reference with every flag
#   TEST_DOMAINS="train shifted scaled" bash run_learning.sh          # + results/domains-<side>-seed<S>.json
#
# Environment: OURS_PY (python with taylorformer; default the repo's .venv), DL4BI_VENV
# (reference venv, default ~/.cache/ref-dl4bi), DATA (npz from dump_data.py), SEEDS,
# STEPS, EVAL_EVERY, REF_ARGS, OURS_ARGS, TEST_DOMAINS (both sides' --test-domains), OUT,
# THREADS (1, the default: one thread per process on both sides; anything else leaves the
# libraries' defaults).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OURS_PY=${OURS_PY:-$HERE/../../../.venv/bin/python}
DL4BI_VENV=${DL4BI_VENV:-$HOME/.cache/ref-dl4bi}
REF_PY=${REF_PY:-$DL4BI_VENV/bin/python}
DATA=${DATA:-$HERE/data/gp2d-nc63-nt64-seed0-2000.npz}
SEEDS=${SEEDS:-0 1 2}
STEPS=${STEPS:-2000}
EVAL_EVERY=${EVAL_EVERY:-500}
mkdir -p "$HERE/results"
OUT=${OUT:-$HERE/results/learning-$(date +%Y%m%d-%H%M%S).jsonl}
export TF_CPP_MIN_LOG_LEVEL=3 JAX_PLATFORMS=cpu
# one thread per process (both sides), unless THREADS=any: the machine is shared
if [ "${THREADS:-1}" = 1 ]; then
  export TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
  export XLA_FLAGS="${XLA_FLAGS:-} --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
fi
echo "# $(date -u +%FT%TZ) data=$DATA steps=$STEPS seeds=$SEEDS -> $OUT" >&2
for seed in $SEEDS; do
  for side in ours ref; do
    echo "[$(date +%H:%M:%S)] $side seed $seed (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    if [ $side = ours ]; then
      nice -n 5 "$OURS_PY" "$HERE/train_ours.py" --data "$DATA" --steps "$STEPS" --eval-every "$EVAL_EVERY" \
        --seed "$seed" ${TEST_DOMAINS:+--test-domains $TEST_DOMAINS} ${OURS_ARGS:-} 2>>"${OUT%.jsonl}.log" | grep --line-buffered '^{' | tee -a "$OUT"
    else
      nice -n 5 "$REF_PY" "$HERE/train_ref.py" --data "$DATA" --steps "$STEPS" --eval-every "$EVAL_EVERY" \
        --seed "$seed" ${TEST_DOMAINS:+--test-domains $TEST_DOMAINS} ${REF_ARGS:-} 2>>"${OUT%.jsonl}.log" | grep --line-buffered '^{' | tee -a "$OUT"
    fi
  done
done
echo "# done $(date -u +%FT%TZ)" >&2
