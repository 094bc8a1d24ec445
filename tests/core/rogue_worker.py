"""A hostile peer of a distributed master, run as its own process: `python rogue_worker.py
HOST:PORT`. It speaks ZeroMQ and msgpack directly, as an attacker would, without the
secret: garbage frames, Locust's own requests the master has no use for, malformed
messages, a wrong proof, fabricated samples (request ids from 10**9 up) and a flood of
joins. It prints what the master answered, one line per attempt; every wait is bounded."""

from __future__ import annotations

import os
import sys
import time

import msgpack
import pyarrow as pa
import zmq

from zqbench.distributed import protocol as p
from zqbench.samples.sample import ARROW_SCHEMA

FAKE_IDS = 10**9  # the fabricated samples' request ids start here
# Bounds each wait for an answer; a master still importing on a busy machine answers late,
# so an answer is taken the moment it comes (2 s flat gave "no ack" on a loaded CI runner).
WAIT_S = 30.0
FLOOD = 100  # fake joins: more than the master keeps pending (guard.MAX_PENDING)


def frame(kind: str, data: object, node: str) -> bytes:
    return msgpack.packb((kind, data, node), use_bin_type=True)


def fabricated_batch(n: int = 50) -> bytes:
    """Valid samples of the run's own schema that no request produced: all 200s, fast."""
    columns = []
    for f in ARROW_SCHEMA:
        if f.name == "request_id":
            columns.append(pa.array(range(FAKE_IDS, FAKE_IDS + n), f.type))
        elif pa.types.is_integer(f.type):
            columns.append(pa.array([200 if f.name == "status" else 1] * n, f.type))
        elif f.nullable:
            columns.append(pa.nulls(n, f.type))
        else:
            columns.append(pa.array([""] * n, f.type) if pa.types.is_string(f.type) else
                           pa.array([0] * n).cast(f.type))  # fmt: skip
    return p.batch_to_bytes(pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA))


def answers(sock: zmq.Socket, until: str, seconds: float = WAIT_S) -> list[tuple]:
    """What the master says until a message of kind `until` (included) or `seconds` pass."""
    out: list[tuple] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not any(m[0] == until for m in out):
        if sock.poll(50):
            out.append(msgpack.unpackb(sock.recv(), raw=False, strict_map_key=False))
    return out


def main(address: str) -> None:
    host, port = address.rsplit(":", 1)
    ctx = zmq.Context()
    node = f"rogue_{os.getpid()}"
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, node.encode())
    sock.setsockopt(zmq.LINGER, 500)
    sock.connect(f"tcp://{host}:{port}")
    sock.send(b"\xc1 not msgpack")  # 0xc1 is never valid msgpack
    sock.send_multipart([b"one", b"frame", b"too many"])
    sock.send(frame("zq_samples", {}, "someone_else"))  # another node's name
    sock.send(frame("client_ready", "2.47.0", node))
    print("ack" if any(m[0] == "ack" for m in answers(sock, "ack")) else "no ack")
    sock.send(frame("locustfile", {"version": "2.47.0"}, node))
    sock.send(frame("heartbeat", [1, 2, 3], node))
    sock.send(frame("zq_hello", [1, 2], node))
    batch = fabricated_batch()
    sock.send(frame(p.SAMPLES, {"batch": batch}, node))  # before any handshake
    sock.send(frame(p.HELLO, {"host": "rogue", "pid": 1, "nonce": os.urandom(32)}, node))
    kinds = [m[0] for m in answers(sock, p.CHALLENGE)]
    print("challenged" if p.CHALLENGE in kinds else f"not challenged: {kinds}")
    sock.send(frame(p.PROOF, {"proof": os.urandom(32)}, node))
    refused = [m[1] for m in answers(sock, p.REFUSED) if m[0] == p.REFUSED]
    print(f"refused: {refused[0]['reason']}" if refused else "not refused")
    # Pretend the handshake went through, sealed with a key it cannot have.
    sealed = {"b": msgpack.packb({"batch": batch}), "n": 1, "mac": os.urandom(32)}
    sock.send(frame(p.SAMPLES, sealed, node))
    sock.send(frame(p.DONE, {"sent": 50}, node))
    flood = []
    for i in range(FLOOD):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.IDENTITY, f"{node}_{i}".encode())
        s.setsockopt(zmq.LINGER, 500)
        s.connect(f"tcp://{host}:{port}")
        s.send(frame("client_ready", "2.47.0", f"{node}_{i}"))
        s.send(frame(p.HELLO, {"host": "flood", "nonce": os.urandom(32)}, f"{node}_{i}"))
        flood.append(s)
    time.sleep(1)
    for s in flood:
        s.close()
    sock.close()
    ctx.term()
    print("done")


if __name__ == "__main__":
    main(sys.argv[1])
