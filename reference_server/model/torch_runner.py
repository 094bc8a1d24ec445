"""`TorchBackend`: the PyTorch implementation of `reference_server.backend.ComputeBackend`.

One scheduler thread owns the backend. A slot's life: `prefill` writes its prompt into the
KV cache at positions 0..n-1 and returns the first generated token; each `decode` writes the
previous token at the slot's next position and returns the next one; `release` frees it.
A slot holds at most `max_seq_len` tokens, prompt plus generated (the interface's budget).

CUDA path (nano-vllm / mini-sglang pattern): decode is captured once per batch-size bucket
(1, 2, 4, 8, ... up to max_slots) as a CUDA graph reading static input buffers (tokens,
slot ids, positions). A step copies its inputs in, pads to the next bucket and replays.
Padded rows point at a spare scratch slot (index `max_slots`) so they never overwrite a
live slot's cache. The graph attends over all `max_seq_len` cache positions (shapes must be
static); the eager path attends only up to the batch's furthest position. Prefill and
sampling always run eagerly. bf16 on CUDA, fp32 on CPU.

Prefix cache (`prefix_cache_blocks` > 0): a prefill first copies the longest cached run of
the prompt's leading full blocks into the slot's KV cache (`kv_blocks.KVBlockPool.load`)
and runs the model on the remaining tokens only, at their true positions: they attend to
the copied positions as to any cached ones. Afterwards the prompt's full blocks not yet
cached are copied out of the slot into the pool. `cached_tokens(slot)` tells how many
prompt tokens the slot's prefill took from the cache.

NVTX ranges (domain "refserver"): "prefill", "decode_step", "sample". They are no-ops unless
a profiler such as Nsight Systems is attached, and absent if the `nvtx` package is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import torch
from torch import Tensor

from reference_server.backend import SamplingParams, StepTiming
from reference_server.model.kv_blocks import KVBlockPool
from reference_server.model.prefix_cache import DEFAULT_BLOCK_SIZE, PrefixCache
from reference_server.model.tokenizer import BOS, GENERATABLE_HIGH, GENERATABLE_LOW, PAD
from reference_server.model.transformer import PRESETS, Transformer, build_model

try:
    import nvtx

    def _nvtx_range(name: str) -> AbstractContextManager[object]:
        return nvtx.annotate(name, domain="refserver")

except ImportError:  # profiling extra not installed: ranges cost nothing

    def _nvtx_range(name: str) -> AbstractContextManager[object]:
        return contextlib.nullcontext()


# dynamic: a decode step computes the running slots only (its cost grows with them); fixed:
# every slot, the free ones padded and masked, as a CUDA-graph engine replays its full batch.
STEP_SHAPES = ("dynamic", "fixed")

KV_CACHE_DTYPES: dict[str, torch.dtype] = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
}


def graph_buckets(max_slots: int) -> list[int]:
    """Decode batch sizes captured as CUDA graphs: powers of two below max_slots, then max_slots."""
    buckets = []
    size = 1
    while size < max_slots:
        buckets.append(size)
        size *= 2
    buckets.append(max_slots)
    return buckets


@dataclasses.dataclass
class _DecodeGraphs:
    """Captured decode graphs and the static buffers they read and write."""

    tokens: Tensor  # [max_slots, 1] int64
    slots: Tensor  # [max_slots] int64
    positions: Tensor  # [max_slots, 1] int64
    logits: Tensor  # [max_slots, V] model dtype
    graphs: dict[int, torch.cuda.CUDAGraph]  # bucket batch size -> graph, ascending


def _filtered_probs(logits: Tensor, top_k: int, top_p: float) -> Tensor:
    """logits: [V] -> probabilities over the top_k most likely tokens (0 = all), then
    over the smallest prefix of those whose probability reaches top_p (at least one)."""
    if top_k > 0 and top_k < logits.numel():
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        # Drop a token when the tokens ranked above it already reach top_p.
        drop = (torch.cumsum(sorted_probs, dim=-1) - sorted_probs) >= top_p
        drop[0] = False
        probs = probs.scatter(0, order, sorted_probs.masked_fill(drop, 0.0))
    return probs


def _sampling_probs(logits: Tensor, params: SamplingParams, greedy_token: Tensor) -> Tensor:
    """logits: [V] -> the distribution `params` samples from. Where it is not one (inf or
    NaN from extreme logits), the one-hot of `greedy_token`: that row decodes greedily
    rather than failing the batch. Chosen on the device, so no host sync."""
    probs = _filtered_probs(logits / params.temperature, params.top_k, params.top_p)
    usable = torch.isfinite(probs).all() & (probs.sum() > 0)
    one_hot = torch.zeros_like(probs).scatter(0, greedy_token.reshape(1), 1.0)
    return torch.where(usable, probs, one_hot)


def _check_shape(preset: str, max_slots: int, max_seq_len: int, step_shape: str) -> None:
    if step_shape not in STEP_SHAPES:
        raise ValueError(f"unknown step_shape {step_shape!r}; choose one of {STEP_SHAPES}")
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    if max_slots < 1:
        raise ValueError(f"max_slots must be >= 1, got {max_slots}")
    if max_seq_len < 2:
        raise ValueError(
            f"max_seq_len must be >= 2 (a prompt token and one more), got {max_seq_len}"
        )


def _check_caches(prefix_cache_blocks: int, prefix_cache_block_size: int, kv_dtype: str) -> None:
    if prefix_cache_blocks < 0 or prefix_cache_block_size < 1:
        raise ValueError(
            f"need prefix_cache_blocks >= 0 (0 = no cache) and prefix_cache_block_size "
            f">= 1, got {prefix_cache_blocks} and {prefix_cache_block_size}"
        )
    if kv_dtype != "auto" and kv_dtype not in KV_CACHE_DTYPES:
        raise ValueError(
            f"unknown kv_cache_dtype {kv_dtype!r}; choose auto or one of {sorted(KV_CACHE_DTYPES)}"
        )


def _torch_device(device: str) -> torch.device:
    """`device` as torch's, CUDA with its index; ValueError for any other kind or no CUDA."""
    try:
        torch_device = torch.device(device)
    except RuntimeError as exc:  # torch's own message lists every device type it knows
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]', got {device!r}") from exc
    if torch_device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"CUDA requested but not available (device={device!r}, torch "
                f"{torch.__version__}); use device='cpu'"
            )
        if torch_device.index is None:
            torch_device = torch.device("cuda", torch.cuda.current_device())
    elif torch_device.type != "cpu":
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]', got {device!r}")
    return torch_device


class TorchBackend:
    name = "torch"

    def __init__(
        self,
        preset: str = "tiny",
        device: str = "cpu",
        max_slots: int = 8,
        max_seq_len: int = 2048,
        seed: int = 0,
        use_cuda_graphs: bool = True,
        kv_cache_dtype: str = "auto",
        checkpoint: str | None = None,
        # Off unless asked, so that a benchmark prefilling one prompt again and again computes
        # it every time; the server asks (ServerConfig.prefix_cache_blocks).
        prefix_cache_blocks: int = 0,
        prefix_cache_block_size: int = DEFAULT_BLOCK_SIZE,
        step_shape: str = "dynamic",
    ) -> None:
        _check_shape(preset, max_slots, max_seq_len, step_shape)
        _check_caches(prefix_cache_blocks, prefix_cache_block_size, kv_cache_dtype)
        torch_device = _torch_device(device)

        self.device = torch_device.type
        self.max_slots = max_slots
        self.max_seq_len = max_seq_len
        self.seed = seed
        self._torch_device = torch_device
        self._is_cuda = torch_device.type == "cuda"
        self.dtype = torch.bfloat16 if self._is_cuda else torch.float32
        self.kv_dtype = self.dtype if kv_cache_dtype == "auto" else KV_CACHE_DTYPES[kv_cache_dtype]
        self.use_cuda_graphs = use_cuda_graphs and self._is_cuda
        self.step_shape = step_shape

        args = dataclasses.replace(PRESETS[preset], max_seq_len=max_seq_len)
        self.preset = preset
        self.args = args
        self.vocab_size = args.vocab_size
        self.model: Transformer = build_model(
            args, seed=seed, device=torch_device, dtype=self.dtype, checkpoint=checkpoint
        )
        # One extra slot, `max_slots`, is scratch space for the padded rows of graph replays.
        self._scratch_slot = max_slots
        self.model.setup_caches(max_slots + 1, self.kv_dtype)
        self.param_count = sum(p.numel() for p in self.model.parameters())
        self._prefix: PrefixCache | None = None
        self._pool: KVBlockPool | None = None
        if prefix_cache_blocks > 0:
            self._prefix = PrefixCache(prefix_cache_blocks, prefix_cache_block_size)
            self._pool = KVBlockPool(self.model, prefix_cache_blocks, prefix_cache_block_size)

        # Added to logits before sampling: only printable ASCII may be generated.
        allowed = torch.full((self.vocab_size,), float("-inf"), device=torch_device)
        allowed[GENERATABLE_LOW : GENERATABLE_HIGH + 1] = 0.0
        self._logit_bias = allowed

        # Per-slot state, host side. _length: prompt + generated tokens so far (the last
        # generated token is not in the cache yet: it is written by the next decode).
        self._active = [False] * max_slots
        self._length = [0] * max_slots
        self._params = [SamplingParams()] * max_slots
        self._generators: list[torch.Generator | None] = [None] * max_slots
        self._cached = [0] * max_slots  # prompt tokens the slot's prefill took from the cache

        self._graphs: _DecodeGraphs | None = None  # captured on first CUDA decode or warmup

    # -- public API ---------------------------------------------------------------------

    @property
    def prefix_cache_block_size(self) -> int | None:
        """Tokens a prefix-cache block holds; None without a prefix cache."""
        return None if self._prefix is None else self._prefix.block_size

    def prefix_cache_bytes(self) -> int:
        """Bytes of the prefix cache's block pool (0 without one)."""
        return 0 if self._pool is None else self._pool.nbytes()

    def cached_tokens(self, slot: int) -> int | None:
        """Prompt tokens the slot's prefill took from the prefix cache; None without one."""
        self._check_slot_index(slot)
        return None if self._prefix is None else self._cached[slot]

    def kv_cache_bytes(self) -> int:
        """Bytes of all KV cache buffers, including the scratch slot."""
        caches = [b for name, b in self.model.named_buffers() if name.endswith("_cache")]
        return sum(b.numel() * b.element_size() for b in caches)

    def warmup(self) -> None:
        """One prefill + decode on slot 0 (then released), and CUDA graph capture on CUDA."""
        if any(self._active):
            raise ValueError("warmup must run before any slot is in use")
        prompt = [BOS] + [ord("a")] * min(15, self.max_seq_len - 2)
        self.prefill([0], [prompt], [SamplingParams()])
        if self.use_cuda_graphs and self._graphs is None:
            self._graphs = self._capture_graphs()
        if self._length[0] < self.max_seq_len:  # room for one decode step
            self.decode([0], [ord("a")])
        self.release(0)
        if self._prefix is not None:  # the warm-up prompt is no request's prefix
            self._prefix.clear()

    def prefill(
        self, slots: list[int], prompts: list[list[int]], params: list[SamplingParams]
    ) -> tuple[list[int], StepTiming]:
        """Run the prompts as one right-padded batch; return each slot's first generated token."""
        if not (len(slots) == len(prompts) == len(params)):
            raise ValueError(
                f"prefill needs one prompt and one SamplingParams per slot, got {len(slots)} "
                f"slots, {len(prompts)} prompts, {len(params)} params"
            )
        self._check_slots(slots, want_active=False)
        for slot, prompt, p in zip(slots, prompts, params, strict=True):
            self._check_prompt(slot, prompt)
            if p.temperature < 0 or p.top_k < 0 or not 0 <= p.top_p <= 1:
                raise ValueError(
                    f"need temperature >= 0, top_k >= 0 and top_p in 0..1, got {p} (slot {slot})"
                )

        def run_prompts() -> Tensor:
            # Every lookup (and its copy into the slot) before any store: a block one row
            # stores may evict a block another row of the batch reads.
            starts = [self._load_prefix(s, p) for s, p in zip(slots, prompts, strict=True)]
            rest = [p[start:] for p, start in zip(prompts, starts, strict=True)]
            seqlen = max(len(r) for r in rest)
            padded = [r + [PAD] * (seqlen - len(r)) for r in rest]
            tokens = torch.tensor(padded, dtype=torch.long, device=self._torch_device)  # [B, S]
            slot_ids = torch.tensor(slots, dtype=torch.long, device=self._torch_device)  # [B]
            offsets = torch.tensor(starts, device=self._torch_device)[:, None]  # [B, 1]
            # A row's tokens sit at their true positions, after its cached prefix. Pad rows
            # write junk at positions >= their prompt length (clamped into the cache); the
            # slot's own decode steps overwrite each position before any query attends to it.
            positions = offsets + torch.arange(seqlen, device=self._torch_device)  # [B, S]
            positions = positions.clamp(max=self.max_seq_len - 1)
            kv_len = min(self.max_seq_len, max(starts) + seqlen)
            last = torch.tensor([len(r) for r in rest], device=self._torch_device) - 1  # [B]
            logits = self.model(tokens, slot_ids, positions, kv_len=kv_len, last_index=last)
            for slot, prompt, start, p in zip(slots, prompts, starts, params, strict=True):
                self._store_prefix(slot, prompt)
                self._active[slot] = True
                self._length[slot] = len(prompt)
                self._cached[slot] = start
                self._params[slot] = p
                self._generators[slot] = None if p.greedy else self._make_generator(p)
            return logits

        return self._step("prefill", slots, run_prompts)

    def decode(self, slots: list[int], last_tokens: list[int]) -> tuple[list[int], StepTiming]:
        """Write each slot's last token at its next position and sample the token after it."""
        if len(slots) != len(last_tokens):
            raise ValueError(f"decode got {len(slots)} slots but {len(last_tokens)} tokens")
        self._check_slots(slots, want_active=True)
        for slot, token in zip(slots, last_tokens, strict=True):
            if not 0 <= token < self.vocab_size:
                raise ValueError(
                    f"token {token} for slot {slot} is outside 0..{self.vocab_size - 1}"
                )
            if self._length[slot] + 1 > self.max_seq_len:
                raise ValueError(
                    f"slot {slot} already holds {self._length[slot]} tokens; another decode "
                    f"step would exceed max_seq_len {self.max_seq_len}"
                )

        def run_last_tokens() -> Tensor:
            # The last generated token goes at position length - 1 (prompt + earlier tokens).
            positions = [self._length[s] - 1 for s in slots]
            rows, tokens = slots, last_tokens
            if self.step_shape == "fixed":
                # Every step computes every slot's row, as a CUDA graph of the full batch
                # replays it: the free ones point at the scratch slot, position 0, and their
                # logits are dropped. The step then costs the same whatever the occupancy.
                pad = self.max_slots - len(slots)
                rows = [*slots, *[self._scratch_slot] * pad]
                tokens = [*last_tokens, *[ord("a")] * pad]
                positions = [*positions, *[0] * pad]
            if self.use_cuda_graphs:
                logits = self._decode_graph(rows, tokens, positions)
            else:
                logits = self._decode_eager(rows, tokens, positions)
            return logits[: len(slots)]

        return self._step("decode_step", slots, run_last_tokens)

    def _step(
        self, name: str, slots: list[int], forward: Callable[[], Tensor]
    ) -> tuple[list[int], StepTiming]:
        """One engine step: `forward()` (logits [B, V]) under inference mode and the NVTX
        range `name`, then each slot's next token sampled and the slot one token longer.
        Timed on the wall clock, and by CUDA events on a GPU."""
        if not slots:
            return [], StepTiming(wall_ms=0.0, gpu_ms=None)
        start_ns = time.perf_counter_ns()
        events = self._start_events()
        with torch.inference_mode(), _nvtx_range(name):
            next_tokens = self._sample(slots, forward())
        for slot in slots:
            self._length[slot] += 1
        return next_tokens, self._finish_timing(start_ns, events)

    def release(self, slot: int) -> None:
        """Free the slot; its stale cache entries are overwritten by the next prefill."""
        self._check_slot_index(slot)
        self._active[slot] = False
        self._length[slot] = 0
        self._params[slot] = SamplingParams()
        self._generators[slot] = None
        self._cached[slot] = 0

    def start_profile(self) -> None:
        """cudaProfilerStart: nsys with --capture-range=cudaProfilerApi records from here."""
        self._need_cuda_profiler()
        torch.cuda.profiler.start()

    def stop_profile(self) -> None:
        self._need_cuda_profiler()
        torch.cuda.synchronize(self._torch_device)  # the capture ends after queued kernels
        torch.cuda.profiler.stop()

    def _need_cuda_profiler(self) -> None:
        if not self._is_cuda:
            raise ValueError(
                "profiling needs CUDA (cudaProfilerStart/Stop); this server runs torch on "
                f"{self.device} (start it with --device cuda on a GPU machine, or set "
                "REFSERVER_TORCH_PROFILER_DIR=DIR for a torch.profiler trace)"
            )

    # -- prefix cache -------------------------------------------------------------------

    def _load_prefix(self, slot: int, prompt: list[int]) -> int:
        """Copy the prompt's cached leading blocks into the slot; return the tokens they hold."""
        if self._prefix is None or self._pool is None:
            return 0
        block_ids = self._prefix.lookup(prompt)
        self._pool.load(slot, block_ids)
        return len(block_ids) * self._prefix.block_size

    def _store_prefix(self, slot: int, prompt: list[int]) -> None:
        """Copy the prompt's full blocks that are not cached yet out of the slot."""
        if self._prefix is not None and self._pool is not None:
            self._pool.save(slot, self._prefix.store(prompt))

    # -- decode paths -------------------------------------------------------------------

    def _decode_eager(self, slots: list[int], tokens: list[int], positions: list[int]) -> Tensor:
        dev = self._torch_device
        tok = torch.tensor(tokens, dtype=torch.long, device=dev)[:, None]  # [B, 1]
        slot_ids = torch.tensor(slots, dtype=torch.long, device=dev)  # [B]
        pos = torch.tensor(positions, dtype=torch.long, device=dev)[:, None]  # [B, 1]
        # Attend only as far as the furthest row needs (host ints: no device sync).
        logits = self.model(tok, slot_ids, pos, kv_len=max(positions) + 1)
        return logits[:, 0]  # [B, V]

    def _decode_graph(self, slots: list[int], tokens: list[int], positions: list[int]) -> Tensor:
        if self._graphs is None:
            self._graphs = self._capture_graphs()
        g = self._graphs
        batch = len(slots)
        bucket = next(b for b in g.graphs if b >= batch)  # keys are ascending
        # Fill the static inputs; padded rows batch..bucket-1 use the scratch slot at position 0.
        g.tokens[:batch, 0].copy_(torch.tensor(tokens, dtype=torch.long))
        g.slots[:batch].copy_(torch.tensor(slots, dtype=torch.long))
        g.positions[:batch, 0].copy_(torch.tensor(positions, dtype=torch.long))
        g.slots[batch:bucket].fill_(self._scratch_slot)
        g.positions[batch:bucket].zero_()
        g.graphs[bucket].replay()
        return g.logits[:batch]

    def _capture_graphs(self) -> _DecodeGraphs:
        """Capture one decode graph per bucket, largest first, sharing one memory pool."""
        if not self._is_cuda:
            raise ValueError("CUDA graphs need a CUDA device")
        dev = self._torch_device
        max_bs = self.max_slots
        g = _DecodeGraphs(
            tokens=torch.full((max_bs, 1), ord("a"), dtype=torch.long, device=dev),
            slots=torch.full((max_bs,), self._scratch_slot, dtype=torch.long, device=dev),
            positions=torch.zeros((max_bs, 1), dtype=torch.long, device=dev),
            logits=torch.zeros((max_bs, self.vocab_size), dtype=self.dtype, device=dev),
            graphs={},
        )
        pool = None
        with torch.inference_mode():
            for bucket in reversed(graph_buckets(max_bs)):
                # Every row points at the scratch slot, so warm-up and capture never touch
                # a live slot's cache.
                self._run_static(g, bucket)  # warm-up: kernels chosen, workspaces allocated
                torch.cuda.synchronize(dev)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool):
                    self._run_static(g, bucket)
                if pool is None:
                    pool = graph.pool()
                g.graphs[bucket] = graph
            torch.cuda.synchronize(dev)
        g.graphs = dict(sorted(g.graphs.items()))
        return g

    def _run_static(self, g: _DecodeGraphs, bucket: int) -> None:
        logits = self.model(
            g.tokens[:bucket],
            g.slots[:bucket],
            g.positions[:bucket],
            kv_len=self.max_seq_len,  # static shape: attend over the whole cache, masked
        )
        g.logits[:bucket] = logits[:, 0]

    # -- sampling -----------------------------------------------------------------------

    def _make_generator(self, params: SamplingParams) -> torch.Generator:
        generator = torch.Generator(device=self._torch_device)
        generator.manual_seed(params.seed)
        return generator

    def _sample(self, slots: list[int], logits: Tensor) -> list[int]:
        """logits: [B, V] -> one token per row, greedy or temperature-sampled per slot."""
        with _nvtx_range("sample"):
            logits = logits.float() + self._logit_bias  # only printable ASCII survives
            chosen = logits.argmax(dim=-1)  # [B]
            for row, slot in enumerate(slots):
                p = self._params[slot]
                if not p.greedy:
                    probs = _sampling_probs(logits[row], p, chosen[row])
                    # Each slot's own generator: its tokens depend only on its seed and
                    # its own context, never on which other slots share the batch.
                    chosen[row] = torch.multinomial(probs, 1, generator=self._generators[slot])[0]
            return chosen.tolist()

    # -- timing and validation ----------------------------------------------------------

    def _start_events(self) -> tuple[torch.cuda.Event, torch.cuda.Event] | None:
        if not self._is_cuda:
            return None
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        return start, end

    def _finish_timing(
        self, start_ns: int, events: tuple[torch.cuda.Event, torch.cuda.Event] | None
    ) -> StepTiming:
        gpu_ms = None
        if events is not None:
            start, end = events
            end.record()
            end.synchronize()
            gpu_ms = start.elapsed_time(end)
        wall_ms = (time.perf_counter_ns() - start_ns) / 1e6
        return StepTiming(wall_ms=wall_ms, gpu_ms=gpu_ms)

    def _check_slot_index(self, slot: int) -> None:
        if not 0 <= slot < self.max_slots:
            raise ValueError(f"slot {slot} is outside 0..{self.max_slots - 1}")

    def _check_slots(self, slots: list[int], want_active: bool) -> None:
        if len(set(slots)) != len(slots):
            raise ValueError(f"duplicate slots in one step: {slots}")
        for slot in slots:
            self._check_slot_index(slot)
            if self._active[slot] != want_active:
                state = "is free" if want_active else "is already in use (release it first)"
                raise ValueError(f"slot {slot} {state}")

    def _check_prompt(self, slot: int, prompt: list[int]) -> None:
        if not prompt:
            raise ValueError(f"empty prompt for slot {slot}")
        if len(prompt) >= self.max_seq_len:
            raise ValueError(
                f"prompt for slot {slot} has {len(prompt)} tokens but max_seq_len is "
                f"{self.max_seq_len}: prompt + generated tokens must fit, so at most "
                f"{self.max_seq_len - 1} prompt tokens"
            )
        if min(prompt) < 0 or max(prompt) >= self.vocab_size:
            raise ValueError(
                f"prompt for slot {slot} has token ids outside 0..{self.vocab_size - 1}"
            )
