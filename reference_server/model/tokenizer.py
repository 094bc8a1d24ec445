"""A byte-level tokenizer: no downloads, exact counts.

Prompt tokens are the UTF-8 bytes of the text (0..255) after a BOS token, so a
prompt's token count is `len(text.encode()) + 1`, exactly. Generated tokens are
restricted to printable ASCII (`GENERATABLE`): random weights would otherwise
emit byte sequences that are not valid UTF-8, and one generated token is then
always one character of output text.
"""

from __future__ import annotations

BYTE_VOCAB = 256
BOS = 256
EOS = 257
PAD = 258
VOCAB_SIZE = 320  # 259 used, padded to a multiple of 64 for the matmuls
GENERATABLE_LOW = 32  # ' '
GENERATABLE_HIGH = 126  # '~', inclusive


def encode(text: str) -> list[int]:
    """The prompt's token ids: BOS, then one token per UTF-8 byte."""
    return [BOS, *text.encode("utf-8")]


def count_tokens(text: str) -> int:
    return len(text.encode("utf-8")) + 1


def decode_token(token: int) -> str:
    """One generated token as text; generated tokens are printable ASCII."""
    if GENERATABLE_LOW <= token <= GENERATABLE_HIGH:
        return chr(token)
    raise ValueError(f"token {token} is not a generatable token (printable ASCII 32..126)")
