"""Convert the tiny HF Llama of tests/vllm to GGUF with llama.cpp's own converter.

    PYTHONPATH=SRC/gguf-py python convert_tiny.py SRC MODEL_DIR OUT.gguf

SRC is the llama.cpp source tree (setup.sh passes the vendored one). Run it with the vLLM venv
(torch and transformers). The converter identifies a BPE pre-tokenizer by hashing the tokens of a
probe string, and refuses a tokenizer trained here, whose hash it has never seen. Ours splits
with the byte-level GPT-2 regex (tokenizers' ByteLevel pre-tokenizer), which llama.cpp calls
"gpt-2"; that is the only thing this script adds. check_tokens.py then proves the result
tokenizes as the HF tokenizer does.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: convert_tiny.py SRC MODEL_DIR OUT.gguf", file=sys.stderr)
        return 2
    src, model, out = (Path(arg) for arg in argv)
    sys.path.insert(0, str(src))
    import convert_hf_to_gguf  # type: ignore[import-not-found]
    from conversion.base import TextModel  # type: ignore[import-not-found]

    def gpt2_pre(self: object, tokenizer: object) -> str:
        return "gpt-2"

    TextModel.get_vocab_base_pre = gpt2_pre
    # f32: the bf16 weights widen exactly, and every CPU computes f32.
    sys.argv = ["convert_hf_to_gguf.py", str(model), "--outfile", str(out), "--outtype", "f32"]
    convert_hf_to_gguf.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
