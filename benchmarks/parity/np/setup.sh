#!/usr/bin/env bash
# Put the reference NP/ANP source in place for check_function.py (see README.md).
#
# Reference: the GitHub repository tung-nd/TNP-pytorch (code of Nguyen & Grover 2022, whose
# NP and ANP the Taylorformer paper's baselines follow), commit
# 73df9225ab584b6148645851d82f96df518da78a; only regression/ is used, unmodified.
# Either
#   REF_NP_GIT_DIR=<a git directory of that repository> bash setup.sh   # exports regression/ into $REF_NP_SRC
# or put a checkout of that commit at $REF_NP_SRC yourself and run `bash setup.sh`.
#
# Interpreter: the PyTorch virtualenv of ../tnp_d (REF_VENV, default ~/.cache/ref-torch:
# torch 2.3.0 and numpy, built by ../tnp_d/setup.sh); the reference needs nothing else
# (check_function.py stands in for the attrdict import the reference's forward() makes).
#
# Environment (all optional):
#   REF_VENV        the torch virtualenv     (default $HOME/.cache/ref-torch)
#   REF_NP_SRC      reference source tree    (default $HOME/.cache/ref-np-src)
#   REF_NP_GIT_DIR  git dir to export the commit from, when $REF_NP_SRC is empty
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REF_VENV=${REF_VENV:-$HOME/.cache/ref-torch}
REF_NP_SRC=${REF_NP_SRC:-$HOME/.cache/ref-np-src}
REF_NP_COMMIT=73df9225ab584b6148645851d82f96df518da78a

if [ ! -f "$REF_NP_SRC/regression/models/anp.py" ]; then
  if [ -z "${REF_NP_GIT_DIR:-}" ]; then
    echo "setup.sh: no reference source at $REF_NP_SRC (regression/models/anp.py missing)." >&2
    echo "  Set REF_NP_GIT_DIR to a git directory of tung-nd/TNP-pytorch holding commit $REF_NP_COMMIT," >&2
    echo "  or place a checkout of that commit at REF_NP_SRC." >&2
    exit 1
  fi
  mkdir -p "$REF_NP_SRC"
  git --git-dir="$REF_NP_GIT_DIR" archive "$REF_NP_COMMIT" regression | tar -x -C "$REF_NP_SRC"
  echo "exported tung-nd/TNP-pytorch@$REF_NP_COMMIT regression/ to $REF_NP_SRC"
fi
if ! (cd "$REF_NP_SRC" && sha256sum --quiet -c "$HERE/ref-sources.sha256"); then
  echo "setup.sh: WARNING: $REF_NP_SRC differs from commit $REF_NP_COMMIT in the files above" >&2
fi
if ! "$REF_VENV/bin/python" -c "import numpy, torch" 2>/dev/null; then
  echo "setup.sh: $REF_VENV lacks torch or numpy: build it with ../tnp_d/setup.sh" >&2
  exit 1
fi
"$REF_VENV/bin/python" -c "import torch; print(f'reference ready: torch {torch.__version__}, source $REF_NP_SRC')"
echo "REF_VENV=$REF_VENV REF_NP_SRC=$REF_NP_SRC"
