"""Build a tiny random-weight Llama that vLLM can serve, with no model hub.

    python tests/vllm/make_tiny_model.py DIR [--think]

Run it with the vLLM venv's interpreter (it needs torch, transformers and tokenizers; see
setup.sh). The output is deterministic: a byte-level BPE tokenizer trained here on generated
text (English-ish words plus emoji and CJK, so that multi-byte characters span several tokens),
a chat template in tokenizer_config.json, and a 2-layer Llama with seeded random weights saved
as safetensors. The text it generates is noise, which is all a load test needs: the server does
the same work per token as for a real model of this shape.

--think builds a second model that reasons, for vLLM's reasoning parser (setup.sh puts it in
tiny-llama-think; the plain model stays as it is, its token counts asserted across the tests).
Its tokenizer adds `<think>` and `</think>`, which the parsers look up by token id; its chat
template opens the thinking at the end of the prompt (`<|assistant|>\n<think>`), as DeepSeek
R1's and Qwen3's thinking templates do, except for a turn offered tools (`<think></think>`,
thinking closed, so that a named tool's call is constrained from its first token). Its weights
never choose `</think>`, `<think>`, EOS, another special token or a token that is part of a
character (see `never_choose`): the thinking ends where vLLM forces `</think>` (after 16
tokens with plugins/end_thinking.py, or at a request's `thinking_token_budget`), the answer
runs to max_tokens, and every token streams as a chunk of its own, so a request's token
counts are exact, not chance.

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
from typing import Any

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
# The reasoning model's, beside RECIPE (unchanged, so that the plain model is not rebuilt).
THINK_RECIPE: dict[str, int | str] = {**RECIPE, "think": 1, "never_logit": -40}
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
THINK_TOKENS = ("<think>", "</think>")
THINK_CHAT_TEMPLATE = CHAT_TEMPLATE.replace(
    "{{ '<|assistant|>\\n' }}",
    "{{ '<|assistant|>\\n' }}"
    "{% if tools %}{{ '<think></think>' }}{% else %}{{ '<think>' }}{% endif %}",
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


def build_tokenizer(out: Path, think: bool) -> int:
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
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
    if think:
        # Not special, as in DeepSeek R1's and Qwen3's tokenizers: the markers stay in the
        # decoded text, where the parsers split reasoning from content.
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK_TOKENS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=ROLE_TOKENS,
        chat_template=THINK_CHAT_TEMPLATE if think else CHAT_TEMPLATE,
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


def never_choose(model: Any, token_ids: list[int], logit: float) -> None:
    """Make the model never sample `token_ids`, whatever the context: their logits sit near
    `logit` or below (e^-40 against 3,000 others near 0), with no bias in a Llama's head.

    Residual channel 0 is a constant: every embedding holds the same value there and no
    layer writes to it (row 0 of each attention and MLP output projection is zero), so after
    the final RMSNorm it is positive at every position; head rows that read only that
    channel, negatively, then give those tokens a large negative logit everywhere. No other
    head row reads it, so the other tokens' logits are the random model's as before. vLLM
    still emits such a token where it forces one (`</think>` at a thinking budget's end), or
    where a grammar allows nothing else (EOS after a tool call's JSON)."""
    import torch

    with torch.no_grad():
        embed = model.model.embed_tokens.weight
        # 16 times a typical channel: normed, channel 0 then measured 1.5-2.3 over 40,000
        # positions of random token sequences (4 times: 0.4-0.9, too near 0 for a margin).
        embed[:, 0] = embed[:, 1:].abs().mean() * 16
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight[0, :] = 0
            layer.mlp.down_proj.weight[0, :] = 0
        head = model.lm_head.weight
        head[:, 0] = 0
        head[token_ids, :] = 0
        # So the logit is at most about 1.5 times `logit`: the never tokens' log-probability
        # measured at most -68.6 over those positions and 300 sampled tokens.
        head[token_ids, 0] = logit / float(model.model.norm.weight[0])


def build_model(out: Path, vocab_size: int, think: bool) -> None:
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
    model = LlamaForCausalLM(config)
    if think:
        # Besides the markers and EOS, the tokens that stream without text: the other special
        # tokens and the 241 that are part of a character (a byte of an emoji or CJK
        # character). vLLM sends no reasoning piece for such a token and its usage's
        # reasoning_tokens does not count it (a budget of 8 reported as 7 where one of the 8
        # was one), so a request's counts would depend on the draw.
        partial = [i for i in range(vocab_size) if "\ufffd" in tok.decode([i])]
        never = [tok.convert_tokens_to_ids(t) for t in (*THINK_TOKENS, *SPECIAL)] + partial
        never_choose(model, never, float(THINK_RECIPE["never_logit"]))
    model = model.to(getattr(torch, str(RECIPE["dtype"])))
    model.save_pretrained(out, safe_serialization=True)
    # Sampling defaults vLLM reads from here: none, so requests decide; EOS ends a turn.
    GenerationConfig(
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    ).save_pretrained(out)


def is_complete(target: Path, recipe: dict[str, int | str]) -> bool:
    marker = target / MARKER
    if not marker.is_file():
        return False
    try:
        return bool(json.loads(marker.read_text(encoding="utf-8")) == recipe)
    except ValueError:
        return False


def main(argv: list[str]) -> int:
    think = "--think" in argv
    args = [a for a in argv if a != "--think"]
    if len(args) != 1:
        print("usage: make_tiny_model.py DIR [--think]", file=sys.stderr)
        return 2
    recipe = THINK_RECIPE if think else RECIPE
    target = Path(args[0]).expanduser().resolve()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is built here; no hub lookups
    if is_complete(target, recipe):
        print(f"make_tiny_model: {target} is complete, left as is")
        return 0
    if target.exists() and any(target.iterdir()) and not (target / MARKER).is_file():
        # Never delete a folder this script did not make.
        print(f"make_tiny_model: {target} exists and is not ours (no {MARKER})", file=sys.stderr)
        return 1
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
    try:
        vocab_size = build_tokenizer(tmp, think)
        build_model(tmp, vocab_size, think)
        (tmp / MARKER).write_text(json.dumps(recipe, indent=1) + "\n", encoding="utf-8")
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
