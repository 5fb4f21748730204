#!/usr/bin/env bash
# Taylorformer ablations (streams x LocalTaylor) on the Taylorformer 1-D GP protocol.
set -euo pipefail
cd "$(dirname "$0")/../.."
ABL='{"taylorformer@no-lt": {"wrapper": null}, "taylorformer-xy@no-lt": {"wrapper": null}, "taylorformer-x@no-lt": {"wrapper": null}}'
.venv/bin/python benchmarks/compare_models.py \
  --models taylorformer,taylorformer@no-lt,taylorformer-xy,taylorformer-xy@no-lt,taylorformer-x,taylorformer-x@no-lt \
  --task gp-taylorformer --batch-size 16 --minutes 2 --cpu-clock --eval-batches 4 --consistency 5 \
  --model-specs "$ABL" --out runs/exp/gp-ablation
