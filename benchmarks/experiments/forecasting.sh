#!/usr/bin/env bash
# Taylorformer vs TNP-A (equal parameters, equal CPU time) on ETTh1 and exchange rate.
set -euo pipefail
cd "$(dirname "$0")/../.."
TNPA='{"tnp-a": {"encoder": {"width": 48, "layers": 4, "ffn_width": 112, "num_heads": 4, "head_dim": 12}, "head": {"width": 48}}}'
for task in ett exchange-rate; do
  .venv/bin/python benchmarks/compare_models.py --models taylorformer,tnp-a --task "$task" --batch-size 32 \
    --minutes 4 --cpu-clock --eval-batches 4 --samples 10 --model-specs "$TNPA" --out "runs/exp/$task"
done
