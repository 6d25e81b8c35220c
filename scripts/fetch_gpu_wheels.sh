#!/usr/bin/env bash
# Download, here (with PyPI access), the wheels that scripts/gpu_smoke.sh installs offline on
# a GPU machine that has Python 3.12, torch and transformers but no network.
#
#   scripts/fetch_gpu_wheels.sh            # -> scripts/wheels/*.whl (about 8 MB)
#   HEAVY=1 scripts/fetch_gpu_wheels.sh    # also pyarrow, pandas, scipy (about 90 MB more)
#
# Versions are the ones installed in .venv, so the GPU machine runs what the tests ran with.
# The default set is what rzero's smoke path imports beyond torch + transformers (and their
# own dependencies: huggingface-hub, tokenizers, safetensors, numpy, pyyaml, regex, tqdm,
# filelock, fsspec, jinja2, sympy): trl and datasets with their pure-Python dependencies,
# math-verify for answer equivalence, sacrebleu for the repetition penalty. gpu_smoke.sh
# installs a wheel only where that package is missing or at another version, so carrying
# one too many costs nothing there. pyarrow, pandas and scipy are large and present on
# common GPU images (this workplace's included); fetch them with HEAVY=1 for a barer one.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-$HERE/../.venv/bin/python}
DEST=${WHEELS_DIR:-$HERE/wheels}
PY_VERSION=${PY_VERSION:-3.12}

PACKAGES="trl datasets dill multiprocess xxhash accelerate math-verify latex2sympy2_extended
antlr4-python3-runtime sacrebleu portalocker tabulate colorama lxml"
if [ "${HEAVY:-0}" = 1 ]; then
  PACKAGES="$PACKAGES pyarrow pandas scipy python-dateutil six"
fi

specs=()
for name in $PACKAGES; do
  version=$("$PY" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$name") \
    || { echo "error: $name is not installed in $PY (run make setup first)" >&2; exit 1; }
  specs+=("$name==$version")
done

mkdir -p "$DEST"
# --no-deps: the list above is the whole closure; resolving would pull torch and CUDA
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$PY_VERSION" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$DEST" "${specs[@]}"
echo "wheels for Python $PY_VERSION in $DEST ($(du -sh "$DEST" | cut -f1)):"
ls "$DEST"
