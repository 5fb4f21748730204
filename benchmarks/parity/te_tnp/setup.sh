#!/usr/bin/env bash
# Build the reference PyTorch environment for the TE-TNP comparison (see README.md).
#
# Reference sources (both used unmodified, never copied into this repository):
#   cambridge-mlg/tetnp  commit 9f1f38d ("Updated README and setup.py"): the TE-TNP code
#   cambridge-mlg/tnp    commit e2adb62406a2382b47c4a10f06b2d38c7aa97001: the library it imports
#                        (the same commit ../tnp_d uses)
# Give each as a checkout (REF_TETNP_SRC, REF_TNP_SRC) or as a git directory to export the
# commit from (REF_TETNP_GIT_DIR, REF_TNP_GIT_DIR: a clone or a bare snapshot).
#
# Environment (all optional):
#   REF_VENV           virtualenv to create (shared with ../tnp_d)  (default $HOME/.cache/ref-torch)
#   REF_TNP_SRC        cambridge-mlg/tnp source tree               (default $HOME/.cache/ref-tnp-src)
#   REF_TETNP_SRC      cambridge-mlg/tetnp source tree             (default $HOME/.cache/ref-tetnp-src)
#   REF_TNP_GIT_DIR, REF_TETNP_GIT_DIR   git dirs to export from when the trees are missing
#   PYTHON             interpreter for the venv (default python3; 3.11 tested, torch 2.3.0 needs <= 3.12)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REF_VENV=${REF_VENV:-$HOME/.cache/ref-torch}
REF_TETNP_SRC=${REF_TETNP_SRC:-$HOME/.cache/ref-tetnp-src}
REF_TETNP_COMMIT=9f1f38d0a7360a2ee19485c2c1b0032f2ab8c46e

# 1. cambridge-mlg/tnp and the venv: ../tnp_d/setup.sh (same pins: torch 2.3.0, check-shapes, einops)
bash "$HERE/../tnp_d/setup.sh"

# 2. cambridge-mlg/tetnp
if [ ! -f "$REF_TETNP_SRC/tetnp/models/tetnp.py" ]; then
  if [ -z "${REF_TETNP_GIT_DIR:-}" ]; then
    echo "setup.sh: no reference source at $REF_TETNP_SRC (tetnp/models/tetnp.py missing)." >&2
    echo "  Set REF_TETNP_GIT_DIR to a git directory of cambridge-mlg/tetnp holding commit $REF_TETNP_COMMIT," >&2
    echo "  or place a checkout of that commit at REF_TETNP_SRC." >&2
    exit 1
  fi
  mkdir -p "$REF_TETNP_SRC"
  git --git-dir="$REF_TETNP_GIT_DIR" archive "$REF_TETNP_COMMIT" | tar -x -C "$REF_TETNP_SRC"
  echo "exported cambridge-mlg/tetnp@$REF_TETNP_COMMIT to $REF_TETNP_SRC"
fi
if ! (cd "$REF_TETNP_SRC" && sha256sum --quiet -c "$HERE/ref-sources.sha256"); then
  echo "setup.sh: WARNING: $REF_TETNP_SRC differs from commit $REF_TETNP_COMMIT in the files above" >&2
fi
SITE=$("$REF_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
(cd "$REF_TETNP_SRC" && pwd) > "$SITE/ref-tetnp-src.pth"

# 3. smoke: the classes train_ref.py builds the model from
"$REF_VENV/bin/python" - <<'PY'
import torch
from tetnp.models.tetnp import TETNP, TETNPEncoder
from tetnp.networks.teattention_layers import MultiHeadCrossTEAttentionLayer
from tetnp.networks.tetransformer import TETNPTransformerEncoder
import tetnp
print(f"reference ready: torch {torch.__version__}, tetnp from {tetnp.__path__[0]}")
PY
