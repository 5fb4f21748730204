#!/usr/bin/env bash
# Log-likelihood vs test shift Delta for TNP-D, TE-TNP and TE-PT-TNP, equal CPU budget.
# As measured in docs/benchmarks.md: TNP-D at 3 layers x 64; the TE models at the
# paper's 5 x 128 with a 2 x 64 kernel MLP.
set -euo pipefail
cd "$(dirname "$0")/../.."
SPECS='{"tnp-d": {"encoder": {"layers": 3, "width": 64, "num_heads": 4, "head_dim": 16}, "head": {"width": 64}},
        "te-tnp": {"encoder": {"attention": {"name": "te", "kernel_width": 64}}},
        "te-pt-tnp": {"encoder": {"attention": {"name": "te", "kernel_width": 64}}}}'
.venv/bin/python benchmarks/compare_models.py --models tnp-d,te-tnp,te-pt-tnp --task gp-te-tnp \
  --minutes 6 --cpu-clock --eval-batches 8 --model-specs "$SPECS" \
  --variants '[{"shift": 0.0}, {"shift": 0.2}, {"shift": 0.4}, {"shift": 0.6}, {"shift": 0.8}, {"shift": 1.0}]' \
  --out runs/exp/shift
