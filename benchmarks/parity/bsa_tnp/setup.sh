#!/usr/bin/env bash
# Build the reference JAX/Flax environment for the BSA-TNP comparison (see README.md),
# from the package registry (PyPI) and the authors' public repository.
#
# Reference source: MLGlobalHealth/dl4bi (the BSA-TNP authors' library), commit
# fb31d9e34b13ed88836a4c6803dbd2b982ba5ea2 (2026-03-31, "update to comment in beijing
# benchmark"; one commit after "v0.1.3 AISTATS 2026"), used unmodified and never copied
# into this repository. It is not pip-installed: a .pth file in the venv puts the source
# tree on the path (the same as PYTHONPATH=$DL4BI_SRC), so nothing is built and no other
# copy of dl4bi can shadow the pinned commit.
#
#   bash setup.sh                                   # clones https://github.com/MLGlobalHealth/dl4bi
#   DL4BI_GIT_DIR=<git dir> bash setup.sh           # exports the commit from a clone or bare snapshot
#
# Packages: requirements-ref.txt (jax/jaxlib 0.8.3 CPU, flax 0.12.6, optax 0.2.8, hydra-core
# 1.3.8, ...: the reference's pyproject dependencies with its `cpu` extra, as pip resolved
# them). ref-sources.sha256: checksums of the reference files `import dl4bi.meta_learning`
# loads, the model YAML and pyproject.toml.
#
# Environment (all optional):
#   DL4BI_VENV     virtualenv to create              (default $HOME/.cache/ref-dl4bi)
#   DL4BI_SRC      reference source tree             (default $HOME/.cache/ref-dl4bi-src)
#   DL4BI_GIT_DIR  git dir to export the commit from when $DL4BI_SRC is empty (else: git clone)
#   DL4BI_REPO     repository to clone               (default https://github.com/MLGlobalHealth/dl4bi.git)
#   PYTHON         interpreter for the venv          (default python3; 3.11 tested, >= 3.11 needed)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DL4BI_VENV=${DL4BI_VENV:-$HOME/.cache/ref-dl4bi}
DL4BI_SRC=${DL4BI_SRC:-$HOME/.cache/ref-dl4bi-src}
DL4BI_REPO=${DL4BI_REPO:-https://github.com/MLGlobalHealth/dl4bi.git}
DL4BI_COMMIT=fb31d9e34b13ed88836a4c6803dbd2b982ba5ea2
PYTHON=${PYTHON:-python3}

# 1. reference source at the pinned commit
if [ ! -f "$DL4BI_SRC/dl4bi/meta_learning/bsa_tnp.py" ]; then
  if [ -n "${DL4BI_GIT_DIR:-}" ]; then
    mkdir -p "$DL4BI_SRC"
    git --git-dir="$DL4BI_GIT_DIR" archive "$DL4BI_COMMIT" | tar -x -C "$DL4BI_SRC"
  else
    git clone --quiet --no-checkout "$DL4BI_REPO" "$DL4BI_SRC"
    git -C "$DL4BI_SRC" checkout --quiet "$DL4BI_COMMIT"
  fi
  echo "MLGlobalHealth/dl4bi@$DL4BI_COMMIT in $DL4BI_SRC"
fi
if ! (cd "$DL4BI_SRC" && sha256sum --quiet -c "$HERE/ref-sources.sha256"); then
  echo "setup.sh: WARNING: $DL4BI_SRC differs from commit $DL4BI_COMMIT in the files above" >&2
fi

# 2. virtualenv from PyPI (kept if it exists; pip then only checks the pins). jax/jaxlib
#    from PyPI are the CPU build.
if [ ! -x "$DL4BI_VENV/bin/python" ]; then
  "$PYTHON" -m venv "$DL4BI_VENV"
fi
"$DL4BI_VENV/bin/python" -m pip install -q --upgrade pip
"$DL4BI_VENV/bin/python" -m pip install -q -r "$HERE/requirements-ref.txt"

# 3. the reference source on the venv's path
SITE=$("$DL4BI_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
(cd "$DL4BI_SRC" && pwd) > "$SITE/ref-dl4bi-src.pth"

# 4. smoke: the model ref_model.py builds from the authors' 2-D GP YAML, and its parameters
cd "$HERE"
JAX_PLATFORMS=cpu "$DL4BI_VENV/bin/python" - <<'PY'
import jax, flax, optax, dl4bi
import ref_model
model, path = ref_model.build()
n = sum(x.size for x in jax.tree_util.tree_leaves(ref_model.init(model)))
print(f"reference ready: jax {jax.__version__} ({jax.default_backend()}), flax {flax.__version__}, "
      f"optax {optax.__version__}, dl4bi from {dl4bi.__path__[0]}; BSATNP from {path}: {n} parameters")
PY
echo "REF=$DL4BI_VENV/bin/python"
