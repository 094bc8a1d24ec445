"""The PyTorch compute backend: KV-cache correctness, sampling, slots, validation, CUDA graphs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the torch backend needs torch (extra: torch)")

from hypothesis import HealthCheck, given, settings  # noqa: E402 (after the importorskip)
from hypothesis import strategies as st  # noqa: E402

from reference_server.backend import SamplingParams  # noqa: E402
from reference_server.model.tokenizer import (  # noqa: E402
    BOS,
    GENERATABLE_HIGH,
    GENERATABLE_LOW,
    encode,
)
from reference_server.model.torch_runner import TorchBackend, graph_buckets  # noqa: E402
from reference_server.model.transformer import (  # noqa: E402
    PRESETS,
    Transformer,
    build_model,
    grouped_query_attention,
)

pytestmark = [pytest.mark.torch, pytest.mark.slow]  # the tiny model on CPU: seconds a test

GREEDY = SamplingParams()
PROMPTS = [encode("hi"), encode("The quick brown fox jumps"), encode("0123456789")]


def generate(backend: TorchBackend, slot: int, prompt: list[int], n: int, params=GREEDY):
    """Prefill then decode alone in `slot`; n tokens in all."""
    tokens, _ = backend.prefill([slot], [prompt], [params])
    while len(tokens) < n:
        nxt, _ = backend.decode([slot], [tokens[-1]])
        tokens.append(nxt[0])
    return tokens


def masked_argmax(logits):
    """Greedy choice among the generatable tokens, as the backend samples."""
    allowed = logits[..., GENERATABLE_LOW : GENERATABLE_HIGH + 1]
    return int(allowed.argmax(-1)) + GENERATABLE_LOW


@pytest.fixture(scope="module")
def tiny_shared() -> TorchBackend:
    return TorchBackend(preset="tiny", max_slots=4, max_seq_len=64, seed=0)


@pytest.fixture
def tiny(tiny_shared: TorchBackend) -> Iterator[TorchBackend]:
    """The module's tiny backend, with every slot free before and after the test."""
    for slot in range(tiny_shared.max_slots):
        tiny_shared.release(slot)
    yield tiny_shared
    for slot in range(tiny_shared.max_slots):
        tiny_shared.release(slot)


def test_model_cached_decode_at_per_row_positions_matches_uncached_forward() -> None:
    """Rows at different positions in one cached batch give the logits of a full recompute."""
    model = build_model(PRESETS["tiny"], seed=3, device=torch.device("cpu"), dtype=torch.float32)
    model.setup_caches(n_slots=4, kv_dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    seqs = {slot: torch.randint(0, 256, (n,), generator=gen) for slot, n in [(2, 9), (0, 4)]}
    with torch.inference_mode():
        # Prefill both slots in one right-padded batch (prompt lengths 6 and 1).
        lengths = {2: 6, 0: 1}
        tokens = torch.zeros(2, 6, dtype=torch.long)
        tokens[0, :6], tokens[1, :1] = seqs[2][:6], seqs[0][:1]
        model(tokens, torch.tensor([2, 0]), torch.arange(6).expand(2, -1), kv_len=6)
        # Decode both together, each at its own position, three steps.
        for _ in range(3):
            slots = [2, 0]
            pos = torch.tensor([[lengths[s]] for s in slots])  # [B, 1]
            step = torch.stack([seqs[s][lengths[s]] for s in slots])[:, None]
            cached = model(step, torch.tensor(slots), pos, kv_len=int(pos.max()) + 1)[:, 0]
            for row, slot in enumerate(slots):
                full = model.forward_uncached(seqs[slot][None, : lengths[slot] + 1])[0, -1]
                torch.testing.assert_close(cached[row], full, rtol=1e-4, atol=1e-4)
                lengths[slot] += 1


def test_grouped_query_attention_equals_repeated_kv_heads() -> None:
    """Stacking a group's query heads along the sequence equals repeating the kv heads."""
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(3, 8, 5, 16, generator=gen)  # [B, H, S, D]
    k, v = torch.randn(2, 3, 2, 11, 16, generator=gen)  # [B, Hkv, L, D] each
    mask = torch.rand(3, 1, 5, 11, generator=gen) < 0.7
    mask[..., 0] = True  # every query attends to something
    expected = torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(4, dim=1), v.repeat_interleave(4, dim=1), attn_mask=mask
    )
    torch.testing.assert_close(grouped_query_attention(q, k, v, mask), expected)


def test_backend_batched_decode_matches_uncached_greedy_recompute(tiny: TorchBackend) -> None:
    """Slots prefilled together and at different positions decode as a full recompute would."""
    first, _ = tiny.prefill([0, 1], PROMPTS[:2], [GREEDY, GREEDY])
    seqs = {0: PROMPTS[0] + [first[0]], 1: PROMPTS[1] + [first[1]]}
    for step in range(6):
        if step == 2:  # a new request joins mid-stream, continuous-batching style
            (tok,), _ = tiny.prefill([3], [PROMPTS[2]], [GREEDY])
            seqs[3] = PROMPTS[2] + [tok]
        slots = sorted(seqs)
        out, timing = tiny.decode(slots, [seqs[s][-1] for s in slots])
        assert timing.wall_ms > 0 and timing.gpu_ms is None
        for slot, tok in zip(slots, out, strict=True):
            seqs[slot].append(tok)
    prompt_len = {0: len(PROMPTS[0]), 1: len(PROMPTS[1]), 3: len(PROMPTS[2])}
    with torch.inference_mode():
        for slot, seq in seqs.items():
            logits = tiny.model.forward_uncached(torch.tensor([seq]))[0]  # [S, V]
            expected = [masked_argmax(logits[i]) for i in range(prompt_len[slot] - 1, len(seq) - 1)]
            assert seq[prompt_len[slot] :] == expected, f"slot {slot}"


def test_greedy_is_deterministic_per_weight_seed() -> None:
    a = generate(TorchBackend(seed=7, max_seq_len=64), 0, PROMPTS[1], 30)
    b = generate(TorchBackend(seed=7, max_seq_len=64), 0, PROMPTS[1], 30)
    c = generate(TorchBackend(seed=8, max_seq_len=64), 0, PROMPTS[1], 30)
    assert a == b
    assert a != c


def test_greedy_output_is_not_one_repeated_token(tiny: TorchBackend) -> None:
    """The dummy weights are not degenerate: greedy decoding walks through many tokens."""
    tokens = generate(tiny, 0, encode("Hello"), 50)
    assert len(set(tokens[25:])) >= 4


def test_temperature_sampling_is_reproducible_per_seed(tiny: TorchBackend) -> None:
    hot = [SamplingParams(temperature=1.0, seed=s) for s in (11, 11, 12)]
    runs = []
    for params in hot:
        runs.append(generate(tiny, 2, PROMPTS[1], 30, params))
        tiny.release(2)
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]
    assert runs[0] != generate(tiny, 3, PROMPTS[1], 30, GREEDY)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    prompt=st.lists(st.integers(0, 258), min_size=1, max_size=40),
    temperature=st.sampled_from([0.0, 0.5, 1.0, 5.0]),
    seed=st.integers(0, 2**31),
)
def test_generated_tokens_are_printable_ascii(
    tiny: TorchBackend, prompt: list[int], temperature: float, seed: int
) -> None:
    tokens = generate(tiny, 1, prompt, 8, SamplingParams(temperature=temperature, seed=seed))
    tiny.release(1)
    assert all(GENERATABLE_LOW <= t <= GENERATABLE_HIGH for t in tokens)


def test_reused_slot_matches_fresh_slot(tiny: TorchBackend) -> None:
    """Stale cache entries from a longer earlier sequence never leak into the next one."""
    generate(tiny, 1, encode("a much longer first prompt that fills many positions"), 10)
    tiny.release(1)
    reused = generate(tiny, 1, PROMPTS[0], 20)
    fresh = generate(TorchBackend(preset="tiny", max_slots=4, max_seq_len=64), 3, PROMPTS[0], 20)
    assert reused == fresh


def test_prompt_must_leave_room_for_a_generated_token(tiny: TorchBackend) -> None:
    with pytest.raises(ValueError, match="max_seq_len is 64"):
        tiny.prefill([0], [[BOS] * 65], [GREEDY])
    with pytest.raises(ValueError, match="at most 63 prompt tokens"):
        tiny.prefill([0], [[BOS] * 64], [GREEDY])
    tokens, _ = tiny.prefill([0], [[BOS] * 63], [GREEDY])  # 63 + 1 generated = 64
    with pytest.raises(ValueError, match="exceed max_seq_len 64"):
        tiny.decode([0], tokens)


def test_decode_stops_exactly_at_max_seq_len(tiny: TorchBackend) -> None:
    prompt = encode("abc")  # 4 tokens, so 60 generated tokens fit in 64
    tokens = generate(tiny, 0, prompt, 60)
    assert len(prompt) + len(tokens) == tiny.max_seq_len
    with pytest.raises(ValueError, match="exceed max_seq_len"):
        tiny.decode([0], [tokens[-1]])


def test_slot_state_errors(tiny: TorchBackend) -> None:
    with pytest.raises(ValueError, match="slot 0 is free"):
        tiny.decode([0], [65])
    tiny.prefill([0], [PROMPTS[0]], [GREEDY])
    with pytest.raises(ValueError, match="already in use"):
        tiny.prefill([0], [PROMPTS[0]], [GREEDY])
    with pytest.raises(ValueError, match=r"outside 0\.\.3"):
        tiny.prefill([4], [PROMPTS[0]], [GREEDY])
    with pytest.raises(ValueError, match="duplicate"):
        tiny.decode([0, 0], [65, 65])
    with pytest.raises(ValueError, match="empty prompt"):
        tiny.prefill([1], [[]], [GREEDY])
    with pytest.raises(ValueError, match="token ids outside"):
        tiny.prefill([1], [[320]], [GREEDY])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"preset": "huge"}, "unknown preset"),
        ({"max_slots": 0}, "max_slots"),
        ({"max_seq_len": 1}, "max_seq_len"),
        ({"kv_cache_dtype": "int8"}, "kv_cache_dtype"),
        ({"device": "tpu"}, "device must be"),
        ({"step_shape": "static"}, "unknown step_shape 'static'"),
    ],
)
def test_config_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TorchBackend(**kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error")
def test_cuda_without_gpu_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="CUDA requested but not available"):
        TorchBackend(device="cuda")


def test_preset_sizes() -> None:
    """Parameter counts (vocab 320, untied embeddings), built on the meta device."""
    counts = {}
    for name, args in PRESETS.items():
        with torch.device("meta"):
            counts[name] = sum(p.numel() for p in Transformer(args).parameters())
    assert counts["tiny"] == 475_776
    assert 24e6 < counts["small"] < 27e6
    assert 320e6 < counts["medium"] < 380e6
    assert 1.4e9 < counts["large"] < 1.6e9
    assert TorchBackend(max_seq_len=64).param_count == 475_776


def test_kv_cache_bytes_counts_every_slot_plus_scratch() -> None:
    backend = TorchBackend(preset="tiny", max_slots=2, max_seq_len=16)
    # 2 layers x (k, v) x 3 slots x 2 kv heads x 16 positions x head_dim 32 x 4 bytes
    assert backend.kv_cache_bytes() == 2 * 2 * 3 * 2 * 16 * 32 * 4
    half = TorchBackend(preset="tiny", max_slots=2, max_seq_len=16, kv_cache_dtype="bfloat16")
    assert half.kv_cache_bytes() == backend.kv_cache_bytes() // 2


def test_bfloat16_kv_cache_generates(tmp_path: Path) -> None:
    backend = TorchBackend(max_seq_len=64, kv_cache_dtype="bfloat16")
    tokens = generate(backend, 0, PROMPTS[1], 20)
    assert all(GENERATABLE_LOW <= t <= GENERATABLE_HIGH for t in tokens)


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    source = TorchBackend(seed=5, max_seq_len=64)
    path = tmp_path / "tiny.pt"
    source.model.save(path)
    loaded = TorchBackend(seed=99, max_seq_len=64, checkpoint=str(path))
    assert generate(loaded, 0, PROMPTS[1], 20) == generate(source, 0, PROMPTS[1], 20)
    with pytest.raises(ValueError, match="does not match"):
        TorchBackend(preset="small", max_seq_len=64, checkpoint=str(path))


def test_warmup_leaves_every_slot_free() -> None:
    backend = TorchBackend(max_seq_len=64)
    backend.warmup()
    assert generate(backend, 0, PROMPTS[0], 5) == generate(
        TorchBackend(max_seq_len=64), 0, PROMPTS[0], 5
    )


def test_warmup_with_the_smallest_context() -> None:
    """max_seq_len 2 holds a 1-token prompt and one generated token: no decode step fits."""
    backend = TorchBackend(max_seq_len=2)
    backend.warmup()
    tokens, _ = backend.prefill([0], [[BOS]], [GREEDY])
    assert len(tokens) == 1
    with pytest.raises(ValueError, match="exceed max_seq_len 2"):
        backend.decode([0], tokens)


def test_graph_buckets() -> None:
    assert graph_buckets(1) == [1]
    assert graph_buckets(8) == [1, 2, 4, 8]
    assert graph_buckets(12) == [1, 2, 4, 8, 12]


# -- CUDA ------------------------------------------------------------------------------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.gpu
@needs_cuda
def test_cuda_graph_replay_equals_eager_decode() -> None:
    """Replaying a captured (and padded) decode graph gives the eager decode's logits."""
    backend = TorchBackend(preset="tiny", device="cuda", max_slots=8, max_seq_len=128)
    backend.warmup()
    prompts = [encode("x" * n) for n in (3, 20, 7)]  # 3 rows: padded to the bucket of 4
    first, timing = backend.prefill([5, 1, 6], prompts, [GREEDY] * 3)
    assert timing.gpu_ms is not None
    slots, last = [5, 1, 6], first
    for _ in range(4):
        positions = [backend._length[s] - 1 for s in slots]
        with torch.inference_mode():
            # Writing the same token at the same position twice is idempotent.
            eager = backend._decode_eager(slots, last, positions).float().clone()
            graph = backend._decode_graph(slots, last, positions).float().clone()
        torch.testing.assert_close(graph, eager, rtol=2e-2, atol=2e-2)
        last, timing = backend.decode(slots, last)
        assert timing.gpu_ms is not None and timing.gpu_ms > 0


@pytest.mark.gpu
@needs_cuda
def test_cuda_graph_padding_does_not_touch_other_slots() -> None:
    """A slot left out of a padded graph batch continues exactly as if run alone."""
    backend = TorchBackend(preset="tiny", device="cuda", max_slots=4, max_seq_len=64)
    alone = generate(backend, 0, PROMPTS[1], 10)
    backend.release(0)
    (tok,), _ = backend.prefill([0], [PROMPTS[1]], [GREEDY])
    together = [tok]
    backend.prefill([1, 2, 3], PROMPTS, [GREEDY] * 3)
    for _ in range(9):
        backend.decode([1, 2, 3], [65, 66, 67])  # batch 3: padded to 4 with the scratch slot
        (tok,), _ = backend.decode([0], [together[-1]])
        together.append(tok)
    assert together == alone


def test_fixed_steps_compute_every_slot_and_generate_as_dynamic_ones() -> None:
    """Fixed-shape decode runs the full batch (free slots padded onto the scratch slot and
    dropped), so its cost does not follow occupancy, and the tokens are the dynamic ones."""
    fixed = TorchBackend(preset="tiny", max_slots=4, max_seq_len=64, seed=0, step_shape="fixed")
    dynamic = TorchBackend(preset="tiny", max_slots=4, max_seq_len=64, seed=0)
    rows: list[int] = []  # rows of each decode forward ([B, 1] tokens)
    forward = fixed.model.forward

    def counting(tokens, *args, **kwargs):  # type: ignore[no-untyped-def]
        if tokens.shape[1] == 1:
            rows.append(tokens.shape[0])
        return forward(tokens, *args, **kwargs)

    fixed.model.forward = counting  # type: ignore[method-assign]
    for backend in (fixed, dynamic):
        backend.prefill([0, 2], [PROMPTS[0], PROMPTS[1]], [GREEDY, GREEDY])
    rows.clear()
    a = fixed.decode([0, 2], [ord("a"), ord("b")])[0]
    b = dynamic.decode([0, 2], [ord("a"), ord("b")])[0]
    assert a == b
    assert rows == [4]  # two running, four rows computed
    assert generate(fixed, 1, PROMPTS[2], 8) == generate(dynamic, 1, PROMPTS[2], 8)
    assert rows == [4] * 8  # seven decode steps alone in slot 1, each of four rows
    # The free slot 3 was never written: a prefill there matches a fresh backend's.
    assert generate(fixed, 3, PROMPTS[0], 6) == generate(dynamic, 3, PROMPTS[0], 6)
