"""Prove the GGUF tokenizes as the HF tokenizer does, token for token, through llama-server.

    python check_tokens.py LLAMA_SERVER MODEL.gguf HF_MODEL_DIR

Run with the vLLM venv (transformers). It starts the server on a free loopback port, pinned to
core 0, sends each probe text to POST /tokenize (no special tokens), and compares the ids with
transformers' encode(add_special_tokens=False); then one conversation's chat prompt: its ids
through POST /apply-template and /tokenize, and its usage.prompt_tokens. A mismatch prints the
first differing position and exits 1. The probes cover what zqbench's prompts and the token
tests hold: words, punctuation, runs of spaces and newlines, digits, emoji (multi-token
characters), CJK and kana.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

PROBES = [
    "The server measures latency under load, and the queue stays empty.",
    "  two spaces, then\nnewlines\n\n\nand\ttabs \t here",
    "Numbers 1 22 333 4444 55555 3.14159 and 2026-12-04T08:50:41Z",
    "Emoji 😀😂🙂 🚀🔥✨ ⏱️ 🦀🐍 ✅❌ mixed with words",
    "的一是不了人我在有他这中大来上国 頭語日本東京電車 あいうえおかきくけこ。",
    "unseen words: zyzzyva quixotic Ω≈ç√∫ µ≤≥÷ — “quotes” ‘single’",
    "What's up? I'll say it: they're here, we've gone, you'd know.",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def post(url: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(json.loads(response.read()))


def wait_ready(base: str, proc: subprocess.Popen[bytes], deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited with {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"llama-server not ready after {deadline_s:.0f} s")


def first_difference(a: list[int], b: list[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: check_tokens.py LLAMA_SERVER MODEL.gguf HF_MODEL_DIR", file=sys.stderr)
        return 2
    server, gguf, hf_dir = argv
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(hf_dir)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    pin = ["taskset", "-c", "0"] if (os.cpu_count() or 1) > 1 else []
    proc = subprocess.Popen(
        [*pin, server, "-m", gguf, "--host", "127.0.0.1", "--port", str(port), "-t", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    failures = 0
    try:
        wait_ready(base, proc, 60)
        for text in PROBES:
            want = tok.encode(text, add_special_tokens=False)
            got = list(post(base + "/tokenize", {"content": text, "add_special": False})["tokens"])  # type: ignore[call-overload]
            if got != want:
                at = first_difference(got, want)
                print(
                    f"check_tokens: MISMATCH on {text!r} at token {at}: "
                    f"llama.cpp {got[at : at + 5]} vs HF {want[at : at + 5]}",
                    file=sys.stderr,
                )
                failures += 1
        # llama.cpp renders the template without the BOS text and adds BOS as a token when it
        # tokenizes (add_bos_token), so compare what the model sees: the ids, and the usage
        # count a chat completion reports.
        messages = [{"role": "user", "content": "Hello there 🚀"}]
        want_ids = list(
            tok(
                tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
                add_special_tokens=False,
            )["input_ids"]
        )
        rendered = post(base + "/apply-template", {"messages": messages})["prompt"]
        got_ids = list(
            post(
                base + "/tokenize",
                {"content": rendered, "add_special": True, "parse_special": True},
            )["tokens"]
        )  # type: ignore[call-overload]
        usage = post(
            base + "/v1/chat/completions",
            {"messages": messages, "max_tokens": 1},
        )["usage"]
        prompt_tokens = int(usage["prompt_tokens"])  # type: ignore[index]
        if got_ids != want_ids or prompt_tokens != len(want_ids):
            print(
                f"check_tokens: chat prompt differs: llama.cpp {got_ids} "
                f"({prompt_tokens} prompt tokens) vs HF {want_ids}",
                file=sys.stderr,
            )
            failures += 1
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    if failures:
        return 1
    print(f"check_tokens: {len(PROBES)} probes and the chat prompt match the HF tokenizer")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
