#!/usr/bin/env bash
# Serves the tiny model with llama.cpp's llama-server on 127.0.0.1:PORT, in the foreground.
#
#   tests/llamacpp/serve.sh PORT [extra llama-server flags...]
#
# Needs tests/llamacpp/setup.sh first. The last step is an exec, so this script's PID becomes
# the server's: stop it with SIGTERM to that PID, or to its process group (target.py does).
#
#   ZQ_LLAMACPP_DIR   the build cache     (default ~/.cache/zqbench/llama-server)
#   ZQ_LLAMACPP_CPUS  the core it gets    (default 0; leave the other to the load generator)
set -euo pipefail

if [[ $# -lt 1 || ! "$1" =~ ^[0-9]+$ ]]; then
    echo "usage: $0 PORT [extra llama-server flags...]" >&2
    exit 2
fi
PORT="$1"
shift

CACHE="${ZQ_LLAMACPP_DIR:-$HOME/.cache/zqbench/llama-server}"
CPUS="${ZQ_LLAMACPP_CPUS:-0}"
BIN="$CACHE/bin/llama-server"
GGUF="$CACHE/tiny-llama.gguf"
for need in "$BIN" "$GGUF"; do
    [[ -e "$need" ]] || { echo "serve: $need is missing; run tests/llamacpp/setup.sh" >&2; exit 1; }
done

# 4 slots (--parallel), each with 2048 tokens of context (-c is split among them), as vLLM's
# --max-model-len 2048. One thread for decode and one for batches: it has one core.
# --threads-http 128: by default its HTTP server keeps slots + 4 = 8 threads, and a kept-alive
# connection holds one while idle, for up to its 5 s keep-alive. zqbench opens its
# connections before it measures (conform: 32 for its widest step); on a busy machine
# those past the 8th were left unread for 5 s, so a request at concurrency 1 timed out and
# zeroqueue.5 skipped (2 of 3 conform runs with both cores loaded; 0 of 2 with 128 threads).
# --metrics and --slots: the /metrics and /slots endpoints zqbench reads.
exec taskset -c "$CPUS" "$BIN" -m "$GGUF" \
    --alias tiny \
    --host 127.0.0.1 --port "$PORT" \
    --parallel 4 -c 8192 \
    -t 1 -tb 1 \
    --metrics --slots \
    --threads-http 128 \
    "$@"
