#!/usr/bin/env bash
# Serves the tiny model with vLLM (CPU) on 127.0.0.1:PORT, in the foreground.
#
#   tests/vllm/serve.sh PORT [extra vLLM serve flags...]
#
# Needs tests/vllm/setup.sh first. The last step is an exec, so this script's PID becomes the
# API server's: stop it with SIGTERM to that PID (its engine process dies with it), or to the
# process group when it was started in a session of its own (target.py does).
#
#   ZQ_VLLM_VENV   the venv            (default ~/.cache/zqbench/vllm-venv)
#   ZQ_VLLM_MODEL  the model dir       (default ~/.cache/zqbench/tiny-llama)
#   ZQ_VLLM_CPUS   the cores vLLM gets (default 0; leave the others to the load generator)
#   VLLM_CPU_KVCACHE_SPACE  KV cache in GiB (default here 1; 2 KiB/token for this model)
set -euo pipefail

if [[ $# -lt 1 || ! "$1" =~ ^[0-9]+$ ]]; then
    echo "usage: $0 PORT [extra vLLM serve flags...]" >&2
    exit 2
fi
PORT="$1"
shift

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${ZQ_VLLM_VENV:-$HOME/.cache/zqbench/vllm-venv}"
MODEL="${ZQ_VLLM_MODEL:-$HOME/.cache/zqbench/tiny-llama}"
CPUS="${ZQ_VLLM_CPUS:-0}"

for need in "$VENV/bin/python" "$MODEL/config.json"; do
    [[ -e "$need" ]] || { echo "serve: $need is missing; run tests/vllm/setup.sh" >&2; exit 1; }
done

# Pinned: the CPU build otherwise spins OpenMP threads on every core and starves the client
# (and the machine) for seconds. taskset fixes the affinity of every process vLLM starts;
# VLLM_CPU_OMP_THREADS_BIND makes its OpenMP pool match instead of binding by itself.
export VLLM_CPU_OMP_THREADS_BIND="$CPUS"
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
# Plugins a flag names, e.g. `--logits-processors end_thinking:EndThinking`: vLLM's worker
# processes import them from plugins/ (a folder of their own: nothing there can shadow a
# package vLLM imports).
export PYTHONPATH="$HERE/plugins${PYTHONPATH:+:$PYTHONPATH}"
# Offline and quiet on the network: no hub lookups, no usage report.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1

# vllm_cli.py stands in for the `vllm` console script, which vllm-cpu 0.32.0 breaks (see there).
# --enforce-eager: no torch.compile or graph capture, the shorter cold start (README.md).
# --enable-prompt-tokens-details: usage says how many prompt tokens the prefix cache gave.
exec taskset -c "$CPUS" "$VENV/bin/python" "$HERE/vllm_cli.py" serve "$MODEL" \
    --served-model-name tiny \
    --host 127.0.0.1 --port "$PORT" \
    --max-model-len 2048 \
    --max-num-seqs 8 \
    --enforce-eager \
    --enable-prompt-tokens-details \
    "$@"
