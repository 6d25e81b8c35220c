#!/usr/bin/env bash
# rzero smoke test for a bare GPU machine: one NVIDIA GPU, Python 3.12 with torch and
# transformers, no trl/datasets/vllm and no network. Downloads nothing.
#
#   scripts/fetch_gpu_wheels.sh    # first, on a machine with PyPI access: fills scripts/wheels/
#   scripts/gpu_smoke.sh           # then, on the GPU machine, from a copy of the repo
#
# 1. installs the wheels in scripts/wheels/ whose package is missing (or at another version)
#    and rzero itself (--no-deps) into $SMOKE_SITE, put first on PYTHONPATH: the machine's
#    own environment is left as it is;
# 2. runs scripts/gpu_smoke.py (within $SMOKE_TIMEOUT s, default 450): a random ~100M Llama
#    in bf16, hf-backend tokens/s at batch 40 x 128 tokens, one GRPO step per role with
#    seconds/step and peak GPU memory, printed as a table.
# SMOKE_DEVICE=cpu SMOKE_TINY=1 runs the same path on CPU with a tiny model.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
PY=${PYTHON:-python3}
SITE=${SMOKE_SITE:-/tmp/rzero-smoke-site}
WHEELS=${WHEELS_DIR:-$HERE/wheels}
# offline by construction: no index, and no pip config that could name one
export PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1

need=()
shopt -s nullglob
for whl in "$WHEELS"/*.whl; do
  base=$(basename "$whl")
  name=${base%%-*}
  version=${base#*-}
  version=${version%%-*}
  have=$("$PY" -c 'import importlib.metadata as m, sys
try:
    print(m.version(sys.argv[1]))
except m.PackageNotFoundError:
    print("-")' "$name")
  if [ "$have" != "$version" ]; then
    need+=("$whl")
    echo "install $name $version (found: $have)"
  fi
done

mkdir -p "$SITE"
if [ ${#need[@]} -gt 0 ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" "${need[@]}"
fi
# rzero from a copy of its sources, so the build leaves nothing in the repo
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
cp -r "$REPO/pyproject.toml" "$REPO/README.md" "$REPO/rzero" "$src/"
if ! "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --upgrade \
    --target "$SITE" "$src"; then
  # no setuptools to build with (a fresh venv has none): rzero is pure Python, copy it
  echo "pip could not build rzero; copying the package into $SITE instead" >&2
  rm -rf "$SITE/rzero" && cp -r "$REPO/rzero" "$SITE/rzero"
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"

if ! "$PY" -c "import trl, datasets, math_verify, sacrebleu, scipy, rzero.engine.grpo, rzero.challenger.train, rzero.solver.train"; then
  echo "error: a package rzero's smoke path imports is missing (see the ImportError above);" \
       "fetch its wheel with scripts/fetch_gpu_wheels.sh (HEAVY=1 adds pyarrow, pandas, scipy)" >&2
  exit 1
fi
timeout "${SMOKE_TIMEOUT:-450}" "$PY" "$HERE/gpu_smoke.py"
