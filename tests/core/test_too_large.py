"""A response past the per-request body limit keeps its timing, as `too_large` (#11).

`PoolLimits.max_body_bytes` (64 MiB by default) bounds what one request may receive. A
response that passes it is cut off there; its sample still has the send, the headers, the
first byte and the bytes it really received, so its timing is never lost with its body.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.servers import ProgrammedServer
from zqbench.dialects.base import DialectConfig
from zqbench.engines.native import (
    NativeWorker,
    WorkerControl,
    WorkerSpec,
    now_ns,
    open_worker,
)
from zqbench.load.arrival_rate import ArrivalWork
from zqbench.samples.sample import Sample
from zqbench.sources.synthetic import ClassSpec, SyntheticSource
from zqbench.transport.base import PoolLimits

CAP = 1_000_000
SIZE = 5_000_000


class _Samples:
    """Stands in for the recorder: keeps the samples in memory."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []

    def add(self, sample: Sample) -> None:
        self.samples.append(sample)

    def due(self) -> bool:
        return False

    def close(self) -> None:
        pass


async def _one_request(spec: WorkerSpec) -> tuple[Sample, int]:
    import numpy as np

    worker: NativeWorker = await open_worker(spec, WorkerControl())
    worker.recorder.close()
    worker.recorder = _Samples()  # type: ignore[assignment]
    worker.start_ns = now_ns()
    work = ArrivalWork(
        request_ids=np.array([1], dtype=np.int64),
        times_ns=np.array([1_000_000], dtype=np.int64),
        stages=np.array([0], dtype=np.int32),
    )
    await worker.run(work)
    (sample,) = worker.recorder.samples  # type: ignore[attr-defined]
    return sample, worker.start_ns


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
def test_a_body_past_the_limit_keeps_its_timing(http2: bool, tmp_path: Path) -> None:
    with ProgrammedServer() as server:
        spec = WorkerSpec(
            worker=0,
            n_workers=1,
            base_url=server.url,
            http2=http2,
            limits=PoolLimits(warm_connections=1, max_body_bytes=CAP),
            api="openai",
            dialect_config=DialectConfig(
                model="m", extra_headers=(("x-program", f"/big?bytes={SIZE}"),)
            ),
            source=SyntheticSource((ClassSpec("c", "prompt", 4, 2),), stream=False, seed=0),
            timeout_s=20.0,
            out_dir=str(tmp_path),
        )
        sample, start = asyncio.run(_one_request(spec))
        truth = server.truth("zq-1")
    assert truth is not None
    assert sample.error == "too_large" and sample.status == 200
    assert CAP < sample.bytes_in < SIZE
    assert sample.t_headers is not None and sample.t_first_token is not None
    # The true send, the head as the server wrote it, then the first byte, then the cut.
    assert sample.t_send + start <= truth["t_recv"]
    assert sample.t_headers + start >= truth["t_head"]
    assert sample.t_send < sample.t_headers <= sample.t_first_token <= sample.t_end
