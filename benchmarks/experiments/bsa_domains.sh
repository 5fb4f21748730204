#!/usr/bin/env bash
# BSA-TNP vs TNP-D on the train, shifted and scaled 2-D GP domains, equal CPU budget.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python benchmarks/compare_models.py --models bsa-tnp,tnp-d --task gp-2d-bsa \
  --task-config '{"num_context": [32, 127], "num_target": 256}' --batch-size 8 --minutes 4 --cpu-clock --eval-batches 4 \
  --model-specs '{"bsa-tnp": {"encoder": {"layers": 3}}, "tnp-d": {"encoder": {"layers": 3, "width": 64, "num_heads": 4, "head_dim": 16}, "head": {"width": 128}}}' \
  --variants '[{"domain": "train"}, {"domain": "shifted"}, {"domain": "scaled"}]' --out runs/exp/bsa
