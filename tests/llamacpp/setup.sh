#!/usr/bin/env bash
# Builds the local llama.cpp test target: llama-server from source, and the tiny random Llama
# of tests/vllm (same weights, same tokenizer) converted to GGUF.
# Idempotent and cached: a second run only checks. No network beyond the package index.
#
#   ZQ_LLAMACPP_DIR  the build cache (default ~/.cache/zqbench/llama-server)
#   ZQ_VLLM_MODEL    the HF model dir to convert (default ~/.cache/zqbench/tiny-llama)
#   ZQ_VLLM_VENV     the venv whose torch and transformers convert it (tests/vllm/setup.sh)
#   PYTHON           the interpreter that downloads the source (default python3)
#
# The source is the llama.cpp that the llama-cpp-python sdist vendors: PyPI is the one index this
# machine reaches, and the sdist pins one llama.cpp commit, so the build is reproducible.
# Run tests/vllm/setup.sh first: the model and the converting venv are its.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${ZQ_LLAMACPP_DIR:-$HOME/.cache/zqbench/llama-server}"
MODEL="${ZQ_VLLM_MODEL:-$HOME/.cache/zqbench/tiny-llama}"
VENV="${ZQ_VLLM_VENV:-$HOME/.cache/zqbench/vllm-venv}"
SDIST_VERSION="0.3.36"
SDIST="llama_cpp_python-$SDIST_VERSION.tar.gz"
SRC="$CACHE/src/llama_cpp_python-$SDIST_VERSION/vendor/llama.cpp"
BIN="$CACHE/bin/llama-server"
GGUF="$CACHE/tiny-llama.gguf"

mkdir -p "$CACHE/src" "$CACHE/bin"

if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
    if [[ ! -f "$CACHE/src/$SDIST" ]]; then
        echo "setup: downloading the llama-cpp-python $SDIST_VERSION sdist (vendors llama.cpp)"
        "${PYTHON:-python3}" -m pip download -q --no-deps --no-binary :all: \
            -d "$CACHE/src" "llama-cpp-python==$SDIST_VERSION" \
            2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
    fi
    tar -xzf "$CACHE/src/$SDIST" -C "$CACHE/src"
fi

if [[ ! -x "$BIN" ]]; then
    echo "setup: building llama-server (about 12 minutes on 2 cores, once)"
    start=$SECONDS
    # No web UI (it needs npm or a download), no TLS, no tests or examples: the server only.
    cmake -S "$SRC" -B "$CACHE/build" -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF \
        > "$CACHE/cmake.log" 2>&1 || { tail -40 "$CACHE/cmake.log" >&2; exit 1; }
    cmake --build "$CACHE/build" --target llama-server -j "$(nproc)" \
        > "$CACHE/build.log" 2>&1 || { tail -40 "$CACHE/build.log" >&2; exit 1; }
    cp "$CACHE/build/bin/llama-server" "$BIN.tmp"
    mv "$BIN.tmp" "$BIN"
    echo "setup: built in $((SECONDS - start)) s"
fi
"$BIN" --version >/dev/null 2>&1 || { echo "setup: $BIN --version fails" >&2; "$BIN" --version >&2; exit 1; }

for need in "$VENV/bin/python" "$MODEL/config.json"; do
    [[ -e "$need" ]] || { echo "setup: $need is missing; run tests/vllm/setup.sh first" >&2; exit 1; }
done
if [[ ! -f "$GGUF" || "$MODEL/config.json" -nt "$GGUF" ]]; then
    echo "setup: converting $MODEL to GGUF"
    PYTHONPATH="$SRC/gguf-py" "$VENV/bin/python" "$HERE/convert_tiny.py" \
        "$SRC" "$MODEL" "$GGUF.tmp"
    mv "$GGUF.tmp" "$GGUF"
fi
PYTHONPATH="$SRC/gguf-py" "$VENV/bin/python" "$HERE/check_tokens.py" "$BIN" "$GGUF" "$MODEL"
echo "setup: ready: $BIN, model $GGUF"
