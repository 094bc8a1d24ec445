"""A small decoder-only transformer with a per-slot static KV cache (gpt-fast style).

Architecture (Llama-like): token embedding -> n_layers x [RMSNorm -> grouped-query
attention with RoPE -> residual -> RMSNorm -> SwiGLU MLP -> residual] -> RMSNorm ->
output projection. Attention runs through `torch.nn.functional.scaled_dot_product_attention`.

Continuous batching: every row of a batch belongs to a *slot* with its own position, so
the KV cache is indexed per row (`cache[slots[:, None], :, positions] = k`) and the
attention mask is per row (`key_pos <= query_pos`), unlike gpt-fast's one shared
`input_pos` for the whole batch.

Weights are "dummy weights" (as vLLM's `load_format=dummy`): seeded random values, see
`init_dummy_weights` for the scales and why. A saved `state_dict`
(`Transformer.save`) can be loaded instead with `build_model(..., checkpoint=path)`.

This module, `kv_blocks` and `torch_runner` are the only ones in reference_server that
import torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from reference_server.model.tokenizer import VOCAB_SIZE


@dataclass(frozen=True)
class ModelArgs:
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    ffn_hidden: int
    vocab_size: int = VOCAB_SIZE
    max_seq_len: int = 2048  # RoPE table length; the runner sets it to its KV cache length
    rope_base: float = 10000.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("n_layers", "d_model", "n_heads", "n_kv_heads", "ffn_hidden", "vocab_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"ModelArgs.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_seq_len < 2:
            raise ValueError(f"ModelArgs.max_seq_len must be >= 2, got {self.max_seq_len}")
        if self.d_model % self.n_heads != 0:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads != 0:
            raise ValueError(
                f"n_heads {self.n_heads} is not divisible by n_kv_heads {self.n_kv_heads}"
            )
        if self.head_dim % 2 != 0:
            raise ValueError(f"head_dim {self.head_dim} must be even for RoPE")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


# Parameter counts (vocab 320, untied embeddings) are in docs/torch-backend.md and checked
# by the tests for "tiny" and "small".
PRESETS: dict[str, ModelArgs] = {
    # CPU CI: ~0.47 M parameters.
    "tiny": ModelArgs(n_layers=2, d_model=128, n_heads=4, n_kv_heads=2, ffn_hidden=384),
    # CPU demos / small GPUs: ~25 M parameters.
    "small": ModelArgs(n_layers=8, d_model=512, n_heads=8, n_kv_heads=4, ffn_hidden=1536),
    # GPU: ~340 M parameters (head_dim 64).
    "medium": ModelArgs(n_layers=24, d_model=1024, n_heads=16, n_kv_heads=8, ffn_hidden=3584),
    # GPU: ~1.5 B parameters (head_dim 128), 3 GB in bf16.
    "large": ModelArgs(n_layers=28, d_model=2048, n_heads=16, n_kv_heads=8, ffn_hidden=6656),
}


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        # Normalise in fp32: bf16 sums of squares lose too much precision.
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.type_as(x) * self.weight


def rope_tables(head_dim: int, max_seq_len: int, base: float) -> tuple[Tensor, Tensor]:
    """cos and sin of every (position, frequency) pair: each [max_seq_len, head_dim // 2], fp32."""
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), freqs)
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate consecutive pairs of x. x: [B, S, H, D]; cos, sin: [B, S, D/2]."""
    pairs = x.float().unflatten(-1, (-1, 2))  # [B, S, H, D/2, 2]
    x0, x1 = pairs[..., 0], pairs[..., 1]
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]  # broadcast over heads
    rotated = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
    return rotated.flatten(-2).type_as(x)


def grouped_query_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """SDPA where each kv head serves a group of n_rep query heads, without copying k and v.

    q: [B, H, S, D]; k, v: [B, Hkv, L, D]; mask: [B or 1, 1, S, L] bool (True = attend).
    The n_rep query heads of a group (heads g*n_rep .. g*n_rep+n_rep-1, the layout of
    `k.repeat_interleave(n_rep, dim=1)`) are stacked along the sequence axis, so one SDPA
    call per kv head covers them all and no [B, H, L, D] copy of the cache is made.
    """
    bsz, n_heads, seqlen, head_dim = q.shape
    n_rep = n_heads // k.shape[1]
    q = q.reshape(bsz, k.shape[1], n_rep * seqlen, head_dim)  # q: [B, Hkv, n_rep*S, D]
    mask = mask.repeat(1, 1, n_rep, 1)  # row r of the stacked q is query r % S
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # [B, Hkv, n_rep*S, D]
    return out.view(bsz, n_heads, seqlen, head_dim)


class KVCache(nn.Module):
    """Static keys and values of one layer: [n_slots, n_kv_heads, max_seq_len, head_dim] each.

    Buffers are not persistent: checkpoints hold weights only.
    """

    def __init__(
        self,
        n_slots: int,
        n_kv_heads: int,
        max_seq_len: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        super().__init__()
        self.k_cache: Tensor
        self.v_cache: Tensor
        shape = (n_slots, n_kv_heads, max_seq_len, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device), False)
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device), False)

    def update(
        self, slots: Tensor, positions: Tensor, k: Tensor, v: Tensor, kv_len: int
    ) -> tuple[Tensor, Tensor]:
        """Write k, v at each row's positions; return each row's first kv_len cached positions.

        slots: [B]; positions: [B, S]; k, v: [B, Hkv, S, D] -> returns 2 x [B, Hkv, kv_len, D].
        """
        # Advanced indices in dims 0 and 2 with a slice between them put the indexed dims
        # first, so the target view is [B, S, Hkv, D].
        self.k_cache[slots[:, None], :, positions] = k.transpose(1, 2).to(self.k_cache.dtype)
        self.v_cache[slots[:, None], :, positions] = v.transpose(1, 2).to(self.v_cache.dtype)
        return self.k_cache[slots, :, :kv_len], self.v_cache[slots, :, :kv_len]


@dataclass(frozen=True, slots=True)
class Step:
    """What every layer needs for one forward, besides the hidden states.

    cos, sin: [B, S, D/2], the RoPE tables at each token's position. The cached path has
    slots [B], positions [B, S] and mask [B, 1, S, kv_len], and attends over `kv_len` cache
    positions; the uncached reference path (causal over x alone) has none of the three."""

    cos: Tensor
    sin: Tensor
    kv_len: int
    slots: Tensor | None = None
    positions: Tensor | None = None
    mask: Tensor | None = None


class Attention(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.n_heads = args.n_heads
        self.n_kv_heads = args.n_kv_heads
        self.head_dim = args.head_dim
        self.wq = nn.Linear(args.d_model, args.n_heads * args.head_dim, bias=False)
        self.wk = nn.Linear(args.d_model, args.n_kv_heads * args.head_dim, bias=False)
        self.wv = nn.Linear(args.d_model, args.n_kv_heads * args.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * args.head_dim, args.d_model, bias=False)
        self.kv_cache: KVCache | None = None  # set by Transformer.setup_caches

    def forward(self, x: Tensor, step: Step) -> Tensor:
        """x: [B, S, d_model]. Without slots: causal attention over x alone (reference path)."""
        bsz, seqlen, _ = x.shape
        q = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)  # q: [B, S, H, D]
        k = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)  # k: [B, S, Hkv, D]
        v = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        q, k = apply_rope(q, step.cos, step.sin), apply_rope(k, step.cos, step.sin)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # q: [B, H, S, D]; k, v: [B, Hkv, S, D]

        slots, positions, mask = step.slots, step.positions, step.mask
        if slots is None:
            # Reference path, deliberately the textbook way (the tests compare against it):
            # repeat each kv head for its query heads, causal SDPA, no cache.
            n_rep = self.n_heads // self.n_kv_heads
            k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, H, S, D]
        else:
            if self.kv_cache is None or positions is None or mask is None:
                raise ValueError("call Transformer.setup_caches before a cached forward")
            keys, values = self.kv_cache.update(slots, positions, k, v, step.kv_len)
            keys, values = keys.to(q.dtype), values.to(q.dtype)  # k: [B, Hkv, kv_len, D]
            out = grouped_query_attention(q, keys, values, mask)  # [B, H, S, D]
        out = out.transpose(1, 2).reshape(bsz, seqlen, self.n_heads * self.head_dim)
        return self.wo(out)  # [B, S, d_model]


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.w1 = nn.Linear(args.d_model, args.ffn_hidden, bias=False)
        self.w3 = nn.Linear(args.d_model, args.ffn_hidden, bias=False)
        self.w2 = nn.Linear(args.ffn_hidden, args.d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(args.d_model, args.norm_eps)
        self.attention = Attention(args)
        self.ffn_norm = RMSNorm(args.d_model, args.norm_eps)
        self.feed_forward = FeedForward(args)

    def forward(self, x: Tensor, step: Step) -> Tensor:
        h = x + self.attention(self.attention_norm(x), step)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.d_model)
        self.layers = nn.ModuleList(TransformerBlock(args) for _ in range(args.n_layers))
        self.norm = RMSNorm(args.d_model, args.norm_eps)
        self.output = nn.Linear(args.d_model, args.vocab_size, bias=False)
        self.rope_cos: Tensor
        self.rope_sin: Tensor

    def blocks(self) -> list[TransformerBlock]:
        return [layer for layer in self.layers if isinstance(layer, TransformerBlock)]

    def setup_caches(self, n_slots: int, kv_dtype: torch.dtype) -> None:
        """Allocate the KV caches ([n_slots, Hkv, max_seq_len, D] per layer) and RoPE tables."""
        if n_slots < 1:
            raise ValueError(f"n_slots must be >= 1, got {n_slots}")
        device = self.output.weight.device
        a = self.args
        for layer in self.blocks():
            layer.attention.kv_cache = KVCache(
                n_slots, a.n_kv_heads, a.max_seq_len, a.head_dim, kv_dtype, device
            )
        cos, sin = rope_tables(a.head_dim, a.max_seq_len, a.rope_base)
        self.register_buffer("rope_cos", cos.to(device), persistent=False)
        self.register_buffer("rope_sin", sin.to(device), persistent=False)

    def forward(
        self,
        tokens: Tensor,
        slots: Tensor,
        positions: Tensor,
        kv_len: int,
        last_index: Tensor | None = None,
    ) -> Tensor:
        """Cached forward; each row is one slot at its own positions.

        tokens, positions: [B, S] int64; slots: [B] int64. kv_len: how many cache positions
        to attend over (> every position in `positions`; static under CUDA graphs).
        Returns logits [B, S, V], or [B, V] at `last_index` ([B]) when given.
        """
        # Row b, query s sees cache position j iff j <= positions[b, s]: causal within the
        # new tokens and everything the slot cached before. mask: [B, 1, S, kv_len].
        key_pos = torch.arange(kv_len, device=tokens.device)
        mask = (key_pos[None, None, :] <= positions[:, :, None])[:, None]
        cos, sin = self.rope_cos[positions], self.rope_sin[positions]  # [B, S, D/2]
        step = Step(cos, sin, kv_len, slots, positions, mask)
        h = self.tok_embeddings(tokens)  # [B, S, d_model]
        for layer in self.layers:
            h = layer(h, step)
        if last_index is not None:
            h = h[torch.arange(h.shape[0], device=h.device), last_index]  # [B, d_model]
        return self.output(self.norm(h))

    def forward_uncached(self, tokens: Tensor) -> Tensor:
        """Reference path: full causal forward of tokens [B, S] from position 0, no KV cache."""
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        cos = self.rope_cos[positions].expand(tokens.shape[0], -1, -1)  # [B, S, D/2]
        sin = self.rope_sin[positions].expand(tokens.shape[0], -1, -1)
        step = Step(cos, sin, kv_len=tokens.shape[1])
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, step)
        return self.output(self.norm(h))  # [B, S, V]

    def save(self, path: str | Path) -> None:
        """Write the weights (no caches) as a plain `torch.save(state_dict)` file."""
        torch.save({k: v.detach().cpu() for k, v in self.state_dict().items()}, path)


def init_dummy_weights(model: Transformer, seed: int) -> None:
    """Seeded random weights, filled in `named_parameters()` order from one generator.

    Embeddings normal(0, 1) (nn.Embedding's default), every linear layer
    normal(0, 1/fan_in) (variance preserving), norm weights 1. Smaller scales such as
    normal(0, 0.02) everywhere let the context average dominate the residual stream in
    deeper presets, and greedy decoding then repeats one token forever; with these
    scales the next token depends on the token and its context, and greedy output walks
    through many tokens (tested). The generator lives on the model's device, so the same
    seed gives the same weights on the same device and dtype only.
    """
    device = model.output.weight.device
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            elif name.startswith("tok_embeddings"):
                param.normal_(0.0, 1.0, generator=generator)
            else:  # nn.Linear weight: [out_features, in_features]
                param.normal_(0.0, param.shape[1] ** -0.5, generator=generator)


def build_model(
    args: ModelArgs,
    *,
    seed: int,
    device: torch.device,
    dtype: torch.dtype,
    checkpoint: str | Path | None = None,
) -> Transformer:
    """A Transformer on `device` in `dtype`: dummy weights from `seed`, or a saved checkpoint."""
    # Build on the meta device first: no time spent on nn.Linear's default init of
    # weights that are overwritten anyway (seconds for the large preset).
    with torch.device("meta"):
        model = Transformer(args)
    model = model.to(dtype).to_empty(device=device)
    if checkpoint is None:
        init_dummy_weights(model, seed)
    else:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise ValueError(f"checkpoint {checkpoint} does not match the model: {exc}") from exc
    model.eval()
    return model
