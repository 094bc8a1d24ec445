"""What crosses the wire between master and workers, and Locust itself, imported safely.

Locust's messages are msgpack: plain dicts, lists, numbers, strings and bytes. The run's
parts are sent field by field and rebuilt here, never pickled: a worker must not run code
because a master (or anyone who can reach its port) sent it bytes. Schedules travel as raw
int64 / int32 arrays, sample batches as Arrow IPC streams with the samples' own schema.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from zqbench.dialects.base import DialectConfig
from zqbench.engines.live import WorkerProgress
from zqbench.engines.native import WorkerSpec
from zqbench.errors import UsageError
from zqbench.metrics.classify import ANSWERS
from zqbench.samples.live_counts import (
    HISTOGRAMS,
    N_BINS,
    HistogramCounts,
    HistogramKey,
    LiveCountsSnapshot,
    RequestKey,
)
from zqbench.samples.sample import ARROW_SCHEMA
from zqbench.sources import source_from_wire, source_to_wire
from zqbench.transport.base import PoolLimits

DEFAULT_PORT = 5557  # Locust's
LOOPBACK = "127.0.0.1"
LOOPBACK_BIND = f"{LOOPBACK}:{DEFAULT_PORT}"  # the master's default: this machine only

# zqbench's messages, on top of Locust's own (client_ready, ack, heartbeat, quit, ...).
HELLO = "zq_hello"  # worker -> master: {host, pid, version, nonce}
CHALLENGE = "zq_challenge"  # master -> worker: {nonce, proof} (auth.py)
PROOF = "zq_proof"  # worker -> master: {proof}; only then does it hold a slot
REFUSED = "zq_refused"  # master -> worker: {reason, secret}; the worker exits 3 (2: secret)
# Sealed (auth.Channel) from here on: only a worker that proved the secret hears or says them.
ASSIGN = "zq_assign"  # master -> worker: {index, run, spec, work, api_key_env}
PING = "zq_ping"  # worker -> master: {seq, t1}
PONG = "zq_pong"  # master -> worker: {seq, t1, t2, t3}
READY = "zq_ready"  # worker -> master: {offset_ns, uncertainty_ns, rtt_ns, rounds}
FAILED = "zq_failed"  # worker -> master: {message}: it cannot run its share
START = "zq_start"  # master -> worker: {start_ns} on the master's clock
SAMPLES = "zq_samples"  # worker -> master: {seq, batch, progress}
STOP = "zq_stop"  # master -> worker: stop sending (Ctrl-C on the master)
DONE = "zq_done"  # worker -> master: {sent, recorded, stopped_early, batches}
BYE = "zq_bye"  # master -> worker: everything arrived, exit

WORKER_MESSAGES = (HELLO, PROOF, PING, READY, FAILED, SAMPLES, DONE)
MASTER_MESSAGES = (CHALLENGE, REFUSED, ASSIGN, PONG, START, STOP, BYE)
UNSEALED = (HELLO, CHALLENGE, PROOF, REFUSED)  # the handshake, before a session key exists


def import_locust() -> Any:
    """Locust's Environment, without gevent's monkey patching of the standard library.

    Patched sockets, threads and selectors would break asyncio (the engine), the hooks'
    threads and multiprocessing; Locust's runners need only gevent's own greenlets and
    zmq.green, which work unpatched as long as something runs the gevent hub."""
    os.environ.setdefault("LOCUST_SKIP_MONKEY_PATCH", "1")
    try:
        from locust.env import Environment
    except ImportError:
        raise UsageError(
            "--distributed and `zqbench worker` need Locust: pip install 'zqbench[locust]'"
        ) from None
    return Environment


def parse_address(value: str, *, default_host: str) -> tuple[str, int]:
    """HOST[:PORT] -> (host, port); Locust's port 5557 when none is given."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = value, str(DEFAULT_PORT)
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{value!r} is not HOST[:PORT]")
    return host or default_host, int(port)


def is_run_name(value: object) -> bool:
    """One folder name (the master's run folder's own name, e.g. `20261201T221410Z-burst`):
    not empty, not `.` or `..`, no separator or NUL, so `<out>/<name>` stays under `<out>`."""
    if not isinstance(value, str) or value in ("", ".", ".."):
        return False
    return not any(c in value for c in ("/", "\\", "\0")) and len(value) <= 255


# --------------------------------------------------------------------------- the spec
def spec_to_wire(spec: WorkerSpec) -> dict[str, Any]:
    """The spec as plain data, the API key left out (workers read it from their own env)."""
    data = dataclasses.asdict(spec)
    data["dialect_config"]["api_key"] = None
    data["source"] = source_to_wire(spec.source)
    return data


def spec_from_wire(data: dict[str, Any], *, api_key: str | None, out_dir: str) -> WorkerSpec:
    fields = dict(data)
    dc = dict(fields["dialect_config"])
    dc["extra_headers"] = tuple(tuple(h) for h in dc["extra_headers"])
    dc["api_key"] = api_key
    fields["dialect_config"] = DialectConfig(**dc)
    fields["limits"] = PoolLimits(**fields["limits"])
    fields["source"] = source_from_wire(fields["source"])
    fields["out_dir"] = out_dir
    fields["follow_ups"] = None  # Retry-After follow-ups run on the master's machine only
    return WorkerSpec(**fields)


# --------------------------------------------------------------------------- progress
# A distributed run has no [stop] rules (zqbench.pipeline.execute refuses them), so its
# workers' progress never carries completions: they stay off the wire.
_LOCAL_ONLY = frozenset({"completions", "completions_seq"})


def progress_to_wire(progress: WorkerProgress) -> dict[str, Any]:
    data = {
        f.name: getattr(progress, f.name)
        for f in dataclasses.fields(progress)
        if f.name not in _LOCAL_ONLY
    }
    data["status"] = dict(progress.status)
    data["recent_ms"] = list(progress.recent_ms)
    data["counts"] = None if progress.counts is None else counts_to_wire(progress.counts)
    return data


def counts_to_wire(counts: LiveCountsSnapshot) -> dict[str, Any]:
    return {
        "requests": [[*key, n] for key, n in counts.requests.items()],
        "histograms": [[*key, list(h.bins), h.sum_s] for key, h in counts.histograms.items()],
    }


MAX_COUNT_KEYS = 16384  # stage x class x status x outcome rows a worker may send


def _label(x: Any) -> bool:
    return isinstance(x, str) and len(x) <= 128


def counts_from_wire(data: Any) -> LiveCountsSnapshot:
    """A worker's live counts (--metrics-port); ValueError for anything else."""
    if not isinstance(data, dict) or set(data) != {"requests", "histograms"}:
        raise ValueError("not a worker's live counts")
    rows, hists = data["requests"], data["histograms"]
    if not (isinstance(rows, list) and isinstance(hists, list)):
        raise ValueError("live counts are not lists")
    if len(rows) > MAX_COUNT_KEYS or len(hists) > MAX_COUNT_KEYS:
        raise ValueError("live counts have too many rows")
    requests: dict[RequestKey, int] = {}
    for row in rows:
        if not (isinstance(row, list) and len(row) == 5):
            raise ValueError("a live request count is not stage, class, status, outcome, n")
        stage, cls, status, outcome, n = row
        if not (is_int64(stage) and _label(cls) and _label(status) and is_int64(n) and n >= 0):
            raise ValueError("a live request count is not stage, class, status, outcome, n")
        if outcome not in ANSWERS:
            raise ValueError(f"a live request count has no known outcome: {str(outcome)[:20]}")
        requests[(stage, cls, status, outcome)] = n
    histograms: dict[HistogramKey, HistogramCounts] = {}
    for row in hists:
        if not (isinstance(row, list) and len(row) == 5):
            raise ValueError("a live histogram is not metric, stage, class, bins, sum")
        metric, stage, cls, bins, total = row
        ok = metric in HISTOGRAMS and is_int64(stage) and _label(cls) and is_finite_number(total)
        if not ok or not (isinstance(bins, list) and len(bins) == N_BINS):
            raise ValueError("a live histogram is not metric, stage, class, bins, sum")
        if not all(is_int64(n) and n >= 0 for n in bins):
            raise ValueError("a live histogram's bins are not counts")
        histograms[(metric, stage, cls)] = HistogramCounts(tuple(bins), float(total))
    return LiveCountsSnapshot(requests, histograms)


_PROGRESS_FIELDS = frozenset(f.name for f in dataclasses.fields(WorkerProgress)) - _LOCAL_ONLY
_PROGRESS_INTS = ("sent", "due", "done", "ok", "inflight", "stage", "worker")
MAX_RECENT = 4096  # latencies a progress message may carry (a worker sends its latest 2048)


def progress_from_wire(data: Any) -> WorkerProgress:
    """A worker's live counters, its index and lag included (the live view shows each);
    ValueError for anything but the fields and types a zqbench worker sends."""
    if not isinstance(data, dict) or set(data) != _PROGRESS_FIELDS:
        raise ValueError("not a worker's progress")
    if not all(is_int64(data[k]) for k in _PROGRESS_INTS):
        raise ValueError("a progress counter is not an integer")
    status, recent, lag = data["status"], data["recent_ms"], data["lag_p99_ms"]
    if not isinstance(status, dict) or len(status) > 1024:
        raise ValueError("progress status counts are not a map")
    if not all(isinstance(k, str) and len(k) <= 64 and is_int64(v) for k, v in status.items()):
        raise ValueError("a progress status count is not a name and an integer")
    if not isinstance(recent, (list, tuple)) or len(recent) > MAX_RECENT:
        raise ValueError("progress latencies are not a bounded list")
    if not all(is_finite_number(x) for x in recent) or not (lag is None or is_finite_number(lag)):
        raise ValueError("a progress latency is not a finite number")
    counts = None if data["counts"] is None else counts_from_wire(data["counts"])
    return WorkerProgress(
        **{**data, "recent_ms": tuple(float(x) for x in recent), "counts": counts}
    )


def is_int64(x: Any) -> bool:
    """An int of int64's range from the wire (a bool or a float is not)."""
    return type(x) is int and -(2**63) <= x < 2**63


def is_finite_number(x: Any) -> bool:
    """An int or a float from the wire that is finite (a bool is not)."""
    return type(x) is int or (type(x) is float and math.isfinite(x))  # 10**400 is finite


# --------------------------------------------------------------------------- samples
def batch_to_bytes(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, ARROW_SCHEMA) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def batch_from_bytes(data: bytes) -> pa.Table:
    """The batch's rows; a batch with another schema, or with a null where the schema
    allows none, is refused (ValueError). Arrow's IPC keeps a field's nullable flag but
    not its promise: a peer's null request ids read as NaN and crashed the master."""
    table = ipc.open_stream(pa.py_buffer(data)).read_all()
    if not table.schema.equals(ARROW_SCHEMA):
        raise ValueError("a sample batch with another schema (a different zqbench version?)")
    table.validate(full=True)  # ArrowInvalid, a ValueError, for a damaged buffer
    nulls = [f.name for f in ARROW_SCHEMA if not f.nullable and table.column(f.name).null_count]
    if nulls:
        raise ValueError(f"a sample batch with nulls in {', '.join(nulls)}")
    return table
