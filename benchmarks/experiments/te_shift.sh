#!/usr/bin/env bash
# Log-likelihood vs test shift Delta for TNP-D, TE-TNP and TE-PT-TNP, equal CPU budget.
#   bash benchmarks/experiments/te_shift.sh          # the first sizes compared:
#                                                    # TNP-D 3 layers x 64, the TE models at the
#                                                    # paper's 5 x 128 with a 2 x 64 kernel MLP
#   bash benchmarks/experiments/te_shift.sh equal    # all three at 3 layers x 64 (4 heads x 16),
#                                                    # kernel MLP 2 x 64, head 64
set -euo pipefail
cd "$(dirname "$0")/../.."
SMALL='"layers": 3, "width": 64, "num_heads": 4, "head_dim": 16'
TE='"attention": {"name": "te", "kernel_width": 64}'
if [ "${1:-paper}" = "equal" ]; then
  SPECS="{\"tnp-d\": {\"encoder\": {$SMALL}, \"head\": {\"width\": 64}},
          \"te-tnp\": {\"encoder\": {$SMALL, $TE}, \"head\": {\"width\": 64}},
          \"te-pt-tnp\": {\"encoder\": {$SMALL, $TE}, \"head\": {\"width\": 64}}}"
  OUT=runs/exp/shift-equal
else
  SPECS="{\"tnp-d\": {\"encoder\": {$SMALL}, \"head\": {\"width\": 64}},
          \"te-tnp\": {\"encoder\": {$TE}}, \"te-pt-tnp\": {\"encoder\": {$TE}}}"
  OUT=runs/exp/shift
fi
.venv/bin/python benchmarks/compare_models.py --models tnp-d,te-tnp,te-pt-tnp --task gp-te-tnp \
  --minutes 6 --cpu-clock --eval-batches 8 --model-specs "$SPECS" \
  --variants '[{"shift": 0.0}, {"shift": 0.2}, {"shift": 0.4}, {"shift": 0.6}, {"shift": 0.8}, {"shift": 1.0}]' \
  --out "$OUT"
