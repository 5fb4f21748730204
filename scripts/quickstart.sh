#!/usr/bin/env bash
# Set up a virtualenv and run the main job: train TNP-D (2 attention layers, 6500 steps)
# on the 1-D GP task (a few minutes on a laptop CPU), then evaluate against the exact GP
# ceiling and plot.
# Extra arguments go to `taylorformer train` (e.g. --steps 500).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null || PYTHON=python3
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
exec .venv/bin/taylorformer train --out "${RUN_DIR:-runs/quickstart}" "$@"
