#!/usr/bin/env bash
# Build the reference environment for the Taylorformer comparison (see README.md).
#
# Reference source: the GitHub repository oremnirv/Taylorformer, commit
# dfd0e1d34c80ed75dc91aef022642ce4f4a0487e (HEAD when this folder was made; "Revise README for setup and training
# instructions"). Use a git directory of that repository (a clone, or a snapshot without a
# work tree). Either
#   REF_TAYLORFORMER_GIT_DIR=<that git directory> bash setup.sh   # exports the code files
# or put a checkout at $REF_TAYLORFORMER_SRC yourself and run `bash setup.sh`. The source is
# used unmodified (ref-sources.sha256 lists the files the scripts import); datasets/ and
# weights/ are not needed.
#
# Environment (all optional):
#   REF_VENV                  virtualenv to create  (default $HOME/.cache/ref-taylorformer)
#   REF_TAYLORFORMER_SRC      reference source tree (default $HOME/.cache/ref-taylorformer-src)
#   REF_TAYLORFORMER_GIT_DIR  git dir to export from, when $REF_TAYLORFORMER_SRC is empty
#   PYTHON                    interpreter for the venv (default python3.11; TF 2.13 needs <= 3.11)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REF_VENV=${REF_VENV:-$HOME/.cache/ref-taylorformer}
REF_TAYLORFORMER_SRC=${REF_TAYLORFORMER_SRC:-$HOME/.cache/ref-taylorformer-src}
PYTHON=${PYTHON:-python3.11}

if [ ! -f "$REF_TAYLORFORMER_SRC/model/taylorformer.py" ]; then
  if [ -z "${REF_TAYLORFORMER_GIT_DIR:-}" ]; then
    echo "setup.sh: no reference source at $REF_TAYLORFORMER_SRC (model/taylorformer.py missing)." >&2
    echo "  Set REF_TAYLORFORMER_GIT_DIR to a git directory of oremnirv/Taylorformer," >&2
    echo "  or place a checkout at REF_TAYLORFORMER_SRC." >&2
    exit 1
  fi
  mkdir -p "$REF_TAYLORFORMER_SRC"
  # code only: the snapshot may lack the large dataset/weight blobs
  git --git-dir="$REF_TAYLORFORMER_GIT_DIR" ls-tree -r HEAD --name-only | grep -v -E '^(datasets|weights)/' |
    while read -r f; do
      mkdir -p "$REF_TAYLORFORMER_SRC/$(dirname "$f")"
      git --git-dir="$REF_TAYLORFORMER_GIT_DIR" show "HEAD:$f" > "$REF_TAYLORFORMER_SRC/$f"
    done
  echo "exported oremnirv/Taylorformer@$(git --git-dir="$REF_TAYLORFORMER_GIT_DIR" rev-parse --short HEAD) to $REF_TAYLORFORMER_SRC"
fi
if ! (cd "$REF_TAYLORFORMER_SRC" && sha256sum --quiet -c "$HERE/ref-sources.sha256"); then
  echo "setup.sh: WARNING: $REF_TAYLORFORMER_SRC differs from the files the comparison was made with" >&2
fi

if [ ! -x "$REF_VENV/bin/python" ]; then
  "$PYTHON" -m venv "$REF_VENV"
fi
"$REF_VENV/bin/python" -m pip install -q -r "$HERE/requirements-ref.txt"

REF_TAYLORFORMER_SRC="$REF_TAYLORFORMER_SRC" "$REF_VENV/bin/python" - <<'PY'
import os, sys
sys.path.insert(0, os.environ["REF_TAYLORFORMER_SRC"])
import tensorflow as tf
from model.taylorformer import taylorformer
from data_wrangler.feature_extractor import DE, feature_wrapper
print(f"reference ready: tensorflow {tf.__version__} (Keras 2), source {os.environ['REF_TAYLORFORMER_SRC']}")
PY
echo "REF_VENV=$REF_VENV"
