"""Build a tiny random-weight Llama that vLLM can serve, with no model hub.

    python tests/vllm/make_tiny_model.py DIR

Run it with the vLLM venv's interpreter (it needs torch, transformers and tokenizers; see
setup.sh). The output is deterministic: a byte-level BPE tokenizer trained here on generated
text (English-ish words plus emoji and CJK, so that multi-byte characters span several tokens),
a chat template in tokenizer_config.json, and a 2-layer Llama with seeded random weights saved
as safetensors. The text it generates is noise, which is all a load test needs: the server does
the same work per token as for a real model of this shape.

Idempotent: DIR is built in a sibling temporary folder and renamed into place, and a marker
file records the recipe; a DIR whose marker matches is left alone.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

# Everything that decides the output. A change here rebuilds an existing DIR.
RECIPE: dict[str, int | str] = {
    "recipe": 1,
    "seed": 20240601,
    "vocab_size": 3072,  # BPE target; the config takes the trained tokenizer's real size
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 2048,
    "dtype": "bfloat16",
}
MARKER = "zqbench-tiny-model.json"

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>", "<|tool|>"]
SPECIAL = [BOS, EOS, PAD, *ROLE_TOKENS]

# One turn per message: <|role|>\ncontent<|eos|>\n ; then <|assistant|>\n to generate.
# It reads message.content as a string, so vLLM picks its "string" content format and joins
# OpenAI text parts (and Anthropic text blocks) into one string before rendering.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

_WORD_LINES = (
    "the a an of to in on for with from by at as is are was were be been has have had do does",
    "server client request response token stream queue latency throughput model prompt answer",
    "time second minute load test bench rate batch cache memory core thread process socket",
    "first last next each every other same different small large fast slow early late long",
    "short high low open close send receive read write start stop wait run measure count",
    "report value number result error retry limit window budget sample percentile median",
    "we they it this that these those here there when while because after before until",
    "good bad new old simple clear real random quiet busy idle warm cold full empty",
    "river mountain city garden window morning evening summer winter music coffee paper",
    "table chair book letter story friend family people world house road bridge light",
)
WORDS = [word for line in _WORD_LINES for word in line.split()]
EMOJI = list("😀😂🙂😉😍🤔😴🚀🔥✨🎉🌟🍕🍣☕🌍🌈⚡🐍🦀💡📈📉🧪🔧✅❌⏱️")
CJK = list(
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家"
    "学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经"
    "頭語日本東京電車時間今日天気猫犬花山川空海雨雪風月星光音楽映画写真料理寿司"
)
KANA = list(
    "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん"
)


def corpus(seed: int) -> list[str]:
    """Deterministic training text: mostly English-ish sentences, some emoji and CJK."""
    rng = random.Random(seed)
    lines = []
    for _ in range(30_000):
        words = rng.choices(WORDS, k=rng.randint(4, 16))
        line = " ".join(words).capitalize() + rng.choice([".", ".", "?", "!", ","])
        if rng.random() < 0.15:
            line += " " + "".join(rng.choices(EMOJI, k=rng.randint(1, 3)))
        lines.append(line)
    for _ in range(6_000):
        n = rng.randint(4, 24)
        lines.append("".join(rng.choices(CJK + KANA, k=n)) + rng.choice(["。", "、", "！", "？"]))
    for _ in range(2_000):
        lines.append(" ".join("".join(rng.choices(EMOJI, k=rng.randint(1, 4))) for _ in range(3)))
    rng.shuffle(lines)
    return lines


def build_tokenizer(out: Path) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=RECIPE["vocab_size"],
        min_frequency=2,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(int(RECIPE["seed"])), trainer=trainer)
    # A plain prompt (the completions endpoint, add_special_tokens=True) starts with BOS, like
    # Llama's; the chat template writes its own BOS and vLLM then tokenizes without specials.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, tok.token_to_id(BOS))]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=ROLE_TOKENS,
        chat_template=CHAT_TEMPLATE,
        model_max_length=int(RECIPE["max_position_embeddings"]),
        clean_up_tokenization_spaces=False,
    )
    # save_jinja_files=False: the template goes into tokenizer_config.json, not a side file.
    fast.save_pretrained(out, save_jinja_files=False)
    # transformers 5 writes its own class name, TokenizersBackend, which transformers 4 cannot
    # load; PreTrainedTokenizerFast names the same thing in both.
    config_file = out / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_file.write_text(
        json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return len(fast)


def build_model(out: Path, vocab_size: int) -> None:
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    tok = AutoTokenizer.from_pretrained(out)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=RECIPE["hidden_size"],
        intermediate_size=RECIPE["intermediate_size"],
        num_hidden_layers=RECIPE["num_hidden_layers"],
        num_attention_heads=RECIPE["num_attention_heads"],
        num_key_value_heads=RECIPE["num_key_value_heads"],
        max_position_embeddings=RECIPE["max_position_embeddings"],
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
        dtype=RECIPE["dtype"],
    )
    torch.manual_seed(int(RECIPE["seed"]))
    model = LlamaForCausalLM(config).to(getattr(torch, str(RECIPE["dtype"])))
    model.save_pretrained(out, safe_serialization=True)
    # Sampling defaults vLLM reads from here: none, so requests decide; EOS ends a turn.
    GenerationConfig(
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    ).save_pretrained(out)


def is_complete(target: Path) -> bool:
    marker = target / MARKER
    if not marker.is_file():
        return False
    try:
        return bool(json.loads(marker.read_text(encoding="utf-8")) == RECIPE)
    except ValueError:
        return False


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: make_tiny_model.py DIR", file=sys.stderr)
        return 2
    target = Path(argv[0]).expanduser().resolve()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is built here; no hub lookups
    if is_complete(target):
        print(f"make_tiny_model: {target} is complete, left as is")
        return 0
    if target.exists() and any(target.iterdir()) and not (target / MARKER).is_file():
        # Never delete a folder this script did not make.
        print(f"make_tiny_model: {target} exists and is not ours (no {MARKER})", file=sys.stderr)
        return 1
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
    try:
        vocab_size = build_tokenizer(tmp)
        build_model(tmp, vocab_size)
        (tmp / MARKER).write_text(json.dumps(RECIPE, indent=1) + "\n", encoding="utf-8")
        if target.exists():  # empty, or ours from an older recipe
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    print(f"make_tiny_model: built {target} (vocab {vocab_size})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
