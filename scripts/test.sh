#!/usr/bin/env bash
# Set up tox in a virtualenv and run the test matrix (TensorFlow 2.21, and 2.19 with the
# example third-party plugin installed). TOX_ENVS selects environments (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null || PYTHON=python3
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "tox>=4" "tox-uv>=1.37"
exec .venv/bin/tox run -e "${TOX_ENVS:-tf221,tf219}"
