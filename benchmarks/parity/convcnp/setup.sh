#!/usr/bin/env bash
# The reference environment for the ConvCNP comparison (README.md): the TNP-D one.
#
# Reference: cambridge-mlg/tnp at e2adb62406a2382b47c4a10f06b2d38c7aa97001, which holds
# tnp/models/convcnp.py, tnp/networks/setconv.py and tnp/networks/cnn.py, with torch 2.3.0
# (../tnp_d/setup.sh builds it: same variables, REF_VENV, REF_TNP_SRC, REF_TNP_GIT_DIR).
# This adds the checksums of the ConvCNP files the comparison imports (ref-sources.sha256).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bash "$HERE/../tnp_d/setup.sh"
REF_TNP_SRC=${REF_TNP_SRC:-$HOME/.cache/ref-tnp-src}
if ! (cd "$REF_TNP_SRC" && sha256sum --quiet -c "$HERE/ref-sources.sha256"); then
  echo "setup.sh: WARNING: $REF_TNP_SRC differs from commit e2adb62 in the ConvCNP files above" >&2
fi
"${REF_VENV:-$HOME/.cache/ref-torch}/bin/python" -c \
  "from tnp.models.convcnp import ConvCNP; from tnp.networks.cnn import UNet; print('ConvCNP reference ready')"
