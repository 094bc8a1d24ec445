"""One request cannot fail the others: extreme sampling values are clamped to greedy, and
an engine failure is scoped to the sequence that caused it (issue #12 item 1)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from reference_server.backend import SamplingParams, StepTiming
from reference_server.engine import Engine
from reference_server.metrics import Metrics
from reference_server.model import tokenizer
from reference_server.model.sim import SimBackend
from reference_server.scheduler import Scheduler
from reference_server.sequence import Sequence, State
from tests.reference_server.conftest import MODEL, Server, start_server

needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed (optional extra)"
)
POISON = tokenizer.encode("poison")


class PoisonSim(SimBackend):
    """The sim backend, failing any step that includes the slot holding the POISON prompt."""

    def __init__(self) -> None:
        super().__init__(max_slots=8, max_seq_len=512)
        self.poisoned: set[int] = set()

    def prefill(
        self, slots: list[int], prompts: list[list[int]], params: list[SamplingParams]
    ) -> tuple[list[int], StepTiming]:
        for slot, prompt in zip(slots, prompts, strict=True):
            if prompt == POISON:
                self.poisoned.add(slot)
        self._raise_if_poisoned(slots)
        return super().prefill(slots, prompts, params)

    def decode(self, slots: list[int], last_tokens: list[int]) -> tuple[list[int], StepTiming]:
        self._raise_if_poisoned(slots)
        return super().decode(slots, last_tokens)

    def release(self, slot: int) -> None:
        self.poisoned.discard(slot)
        super().release(slot)

    def _raise_if_poisoned(self, slots: list[int]) -> None:
        if self.poisoned & set(slots):
            raise RuntimeError("probability tensor contains either inf, nan or element < 0")


def _events(seq: Sequence) -> list[str]:
    return [kind for kind, _ in seq.events]


@pytest.mark.parametrize("poison_at", ["prefill", "decode"])
def test_an_engine_failure_fails_only_its_own_sequence(poison_at: str) -> None:
    """Innocent sequences batched with a failing one finish all their tokens; the failing
    one alone gets an "error" event and its slot back."""
    loop = asyncio.new_event_loop()
    backend = PoisonSim()
    sched = Scheduler("zero-queue", max_slots=8, kv_budget_tokens=10_000)
    engine = Engine(backend, sched, Metrics("zero-queue", "sim", "sim", "tiny"), loop)

    def seq(prompt: list[int]) -> Sequence:
        return Sequence("req_x", prompt, 200, (), SamplingParams(), "high-throughput",
                        time.time(), time.perf_counter(), loop)  # fmt: skip

    try:
        innocent = [seq(tokenizer.encode(f"innocent {i}")) for i in range(4)]
        bad = seq(POISON if poison_at == "prefill" else tokenizer.encode("later poison"))
        for s in [*innocent[:2], bad, *innocent[2:]]:
            assert sched.submit(s) is None
        engine.start()
        if poison_at == "decode":  # poison the slot after its prefill went through
            deadline = time.monotonic() + 30
            while bad.output_tokens == 0 and time.monotonic() < deadline:
                time.sleep(0.001)
            backend.poisoned.add(bad.slot)  # type: ignore[arg-type]
        deadline = time.monotonic() + 30
        while sched.num_slots_used and time.monotonic() < deadline:
            time.sleep(0.01)
        engine.stop()
        loop.run_until_complete(asyncio.sleep(0))  # run the posted deliveries
        for s in innocent:
            assert s.state is State.FINISHED and s.output_tokens == 200
            assert _events(s)[0] == "start" and _events(s)[-1] == "end"
        assert bad.state is State.REJECTED and _events(bad)[-1] == "error"
        assert "engine failure: RuntimeError" in (bad.events[-1][1] or "")
        assert sched.num_slots_used == 0 and not backend.poisoned
    finally:
        engine.stop()
        loop.close()


def test_tiny_temperatures_are_greedy() -> None:
    """A temperature whose reciprocal overflows counts as greedy (as does 0)."""
    assert SamplingParams(temperature=0.0).greedy
    assert SamplingParams(temperature=1e-45).greedy
    assert SamplingParams(temperature=1e-6).greedy
    assert not SamplingParams(temperature=1e-5).greedy
    assert not SamplingParams(temperature=0.7).greedy


@pytest.mark.slow
@needs_torch
@pytest.mark.torch
def test_torch_sampling_never_fails_a_batch() -> None:
    """temperature 1e-45 in a batch: every row gets a token; that row is the greedy one."""
    from reference_server.model.torch_runner import TorchBackend

    backend = TorchBackend(preset="tiny", max_slots=3, max_seq_len=64, seed=0)
    prompts = [tokenizer.encode(t) for t in ("one", "two", "three")]
    greedy, _ = backend.prefill([0, 1, 2], prompts, [SamplingParams()] * 3)
    for slot in range(3):
        backend.release(slot)
    params = [SamplingParams(0.8, 1), SamplingParams(1e-45, 2, 0.5, 3), SamplingParams(1.0, 3)]
    tokens, _ = backend.prefill([0, 1, 2], prompts, params)
    assert tokens[1] == greedy[1]
    nxt, _ = backend.decode([0, 1, 2], tokens)
    assert all(tokenizer.GENERATABLE_LOW <= t <= tokenizer.GENERATABLE_HIGH for t in nxt)


@needs_torch
@pytest.mark.torch
def test_torch_non_finite_probabilities_fall_back_to_greedy() -> None:
    """Logits that make the distribution inf/NaN sample the row's greedy token instead."""
    import torch

    from reference_server.model.torch_runner import _sampling_probs

    logits = torch.tensor([0.0, float("nan"), 1.0, float("inf")])
    probs = _sampling_probs(logits, SamplingParams(0.5, 0, 0.9, 2), torch.tensor(2))
    assert probs.tolist() == [0.0, 0.0, 1.0, 0.0]
    fine = _sampling_probs(torch.tensor([0.0, 1.0]), SamplingParams(1.0), torch.tensor(1))
    assert torch.isfinite(fine).all() and 0.0 < float(fine[0]) < float(fine[1])


@pytest.fixture(scope="module")
def torch_server() -> Iterator[Server]:
    server = start_server(
        "--engine", "torch", "--device", "cpu", "--preset", "tiny", "--max-batch-size", "8",
        "--max-context", "512", "--max-concurrent-kernels", "1", wait_s=180,
    )  # fmt: skip
    yield server
    server.stop()


def _stream(url: str, body: dict[str, object], started: threading.Event, out: list[str]) -> None:
    """One streaming Messages call; sets `started` at the first text delta and appends the
    full text, or the error event's message, to `out`."""
    text, error = "", None
    with httpx.stream("POST", url + "/v1/messages", json=body, timeout=120) as r:
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["type"] == "content_block_delta":
                text += event["delta"]["text"]
                started.set()
            elif event["type"] == "error":
                error = event["error"]["message"]
    out.append(f"error: {error}" if error else text)


@needs_torch
@pytest.mark.torch
@pytest.mark.slow
def test_a_poisoned_temperature_does_not_fail_innocent_requests(torch_server: Server) -> None:
    """Six innocent streams are decoding when a request with temperature 1e-45 arrives:
    all seven complete, and the poisoned one is answered greedily."""
    url = torch_server.url
    results: list[str] = []
    threads, started = [], []
    for i in range(6):
        body = {"model": MODEL, "max_tokens": 400, "stream": True, "temperature": 0.7,
                "messages": [{"role": "user", "content": f"innocent {i}"}]}  # fmt: skip
        started.append(threading.Event())
        threads.append(threading.Thread(target=_stream, args=(url, body, started[-1], results)))
        threads[-1].start()
    try:
        for ev in started:
            assert ev.wait(120), "an innocent stream never started"
        poisoned = {"model": MODEL, "max_tokens": 20, "temperature": 1e-45,
                    "messages": [{"role": "user", "content": "poison"}]}  # fmt: skip
        r = httpx.post(url + "/v1/messages", json=poisoned, timeout=120)
        greedy = httpx.post(url + "/v1/messages", json={**poisoned, "temperature": 0}, timeout=120)
    finally:
        for t in threads:
            t.join(180)
    assert r.status_code == 200, r.text
    assert r.json()["content"][0]["text"] == greedy.json()["content"][0]["text"]
    assert len(results) == 6 and all(len(t) == 400 for t in results), results
