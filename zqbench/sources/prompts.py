"""Synthetic prompts of a chosen length, different for every seed.

`synth_prompt(n, seed)` is exactly n - 1 bytes of ASCII words. The reference server's
tokenizer counts one BOS token plus one token per UTF-8 byte, so there the prompt is
exactly n tokens (the chat template around it is the dialect's business). Real
tokenizers pack about 4 bytes of English into a token, so elsewhere the count is only
approximate (about n / 4 tokens); the server's `usage.prompt_tokens` is the truth, and
`zqbench.target.calibrate` maps target tokens to bytes per server, then asks `synth_text` for
that many bytes.

The text starts with the seed so two seeds never share a prefix a server could cache,
and continues with words drawn from a private seeded RNG. Prompts are cached by
(tokens, seed): a mix reuses a few sizes.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

# Common English words: ASCII, one byte per character, typical of a chat prompt.
_WORD_TEXT = (
    "the of and to in is was for on are with as by at from that this be it or an not have "
    "has had but all were when we there can more one which their said each she do how if "
    "will up other about out many then them these so some her would make like him into time "
    "look two write go see number no way could people my than first water been call who oil "
    "its now find long down day did get come made may part over new sound take only little "
    "work know place year live me back give most very after thing our just name good "
    "sentence man think say great where help through much before line right too mean old any "
    "same tell boy follow came want show also around form three small set put end does "
    "another well large must big even such because turn here why ask went men read need land "
    "different home us move try kind hand picture again change off play spell air away "
    "animal house point page letter mother answer found study still learn should world high "
    "every near add food between own below country plant last school father keep tree never "
    "start city earth eye light thought head under story saw left few while along might "
    "close something seem next hard open example begin life always those both paper together "
    "got group often run important until children side feet car mile night walk white sea "
    "began grow took river four carry state once book hear stop without second later miss "
    "idea enough eat face watch far real almost let above girl sometimes mountain cut young "
    "talk soon list song being leave family"
)
WORDS = tuple(_WORD_TEXT.split())
_WORD_BYTES = np.array([len(w) + 1 for w in WORDS], dtype=np.int64)  # with a space


def synth_prompt(target_tokens: int, seed: int) -> str:
    """Deterministic ASCII text of exactly `target_tokens - 1` bytes (see the module doc)."""
    if isinstance(target_tokens, bool) or not isinstance(target_tokens, int) or target_tokens < 1:
        raise ValueError(f"target_tokens must be a whole number >= 1, got {target_tokens!r}")
    return synth_text(target_tokens - 1, seed)


def tagged(base: str, tag: str) -> str:
    """`base` with `tag` over its first bytes: unique, the same length (`base` as it is when
    it is no longer than the tag), so no server caches a prefix across requests."""
    return tag + base[len(tag) :] if len(base) > len(tag) else base


@lru_cache(maxsize=128)
def synth_text(n_bytes: int, seed: int) -> str:
    """Deterministic ASCII words of exactly `n_bytes` bytes (characters)."""
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, int) or n_bytes < 0:
        raise ValueError(f"n_bytes must be a whole number >= 0, got {n_bytes!r}")
    n = n_bytes
    if n == 0:
        return ""
    head = f"{seed}:"
    if n <= len(head):
        return head[:n]
    rng = np.random.default_rng(seed)
    # Every word takes at least 2 bytes, so n // 2 + 1 words always cover n bytes; draw
    # about as many as the mean word length needs, and more in the rare short case.
    count = n // 5 + 16
    parts = [head]
    have = len(head)
    while have < n:
        idx = rng.integers(0, len(WORDS), size=count)
        parts.extend(WORDS[i] for i in idx.tolist())
        have += int(_WORD_BYTES[idx].sum())
        count = n // 2 + 1
    text = " ".join(parts)[:n]
    if text[-1] == " ":
        # A trailing space may be stripped on the way to the tokenizer; keep the length.
        text = text[:-1] + "s"
    return text
