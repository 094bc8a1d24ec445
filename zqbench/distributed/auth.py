"""Who may take part in a distributed run: a shared secret that both sides prove and
neither ever sends (docs/distributed.md#trust).

The handshake, after Locust's own `client_ready`/`ack`:

    worker -> zq_hello     {host, pid, version, nonce: Nw}
    master -> zq_challenge {nonce: Nm, proof: HMAC(K, "master" | node | Nw | Nm)}
    worker -> zq_proof     {proof: HMAC(K, "worker" | node | Nm | Nw)}

K is the secret, `node` the worker's Locust client id (the ZeroMQ identity its frames
arrive under), and both nonces are fresh: a proof is bound to one connection and one role,
so neither side can replay or reflect it. A worker leaves a master whose proof is wrong
(it might send a share that attacks some other target, or a run name meant to escape its
folder); the master gives a worker nothing of the run, neither its share nor its headers,
until the worker's proof checks out.

Every `zq_*` message after that is sealed with a key of that session only,
HMAC(K, "session" | node | Nm | Nw): `{b: msgpack bytes, n: counter, mac}`. A message
from anyone else, a changed one, or a replayed one fails `Channel.open` and is dropped.
The channel is authenticated, not encrypted: `--header` values are readable on the wire.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from typing import Any, TypeGuard

from zqbench.errors import OptionError

SECRET_ENV = "ZQBENCH_SECRET"
MIN_SECRET_CHARS = 16  # 16 hex digits are 64 bits; `openssl rand -hex 32` gives 256
NONCE_BYTES = 32
HOW_TO = (
    f"export {SECRET_ENV}=$(openssl rand -hex 32) with the same value on the master and"
    " every worker"
)


def read_secret(env_var: str | None, option: str = "secret_env") -> bytes:
    """The shared secret held by `env_var` (SECRET_ENV when None), as bytes."""
    name = env_var or SECRET_ENV
    value = os.environ.get(name)
    if not value:
        raise OptionError(option, f"a distributed run needs a shared secret: {HOW_TO}", value=name)
    if len(value) < MIN_SECRET_CHARS:
        raise OptionError(
            option,
            f"the secret is {len(value)} characters; use at least {MIN_SECRET_CHARS}: {HOW_TO}",
            value=name,
        )
    return value.encode()


def new_nonce() -> bytes:
    return secrets.token_bytes(NONCE_BYTES)


def proof(secret: bytes, role: str, node: str, challenge: bytes, own: bytes) -> bytes:
    """What `role` ("master" or "worker") shows to prove it holds the secret: a MAC over the
    peer's fresh nonce (`challenge`) and its own."""
    return _mac(secret, role.encode(), node.encode(), challenge, own)


def proof_ok(secret: bytes, role: str, node: str, challenge: bytes, own: bytes, shown: Any) -> bool:
    """Is `shown` the proof `role` owes for these nonces? (constant-time comparison)"""
    return isinstance(shown, bytes) and hmac.compare_digest(
        proof(secret, role, node, challenge, own), shown
    )


def is_nonce(value: Any) -> TypeGuard[bytes]:
    return isinstance(value, bytes) and len(value) == NONCE_BYTES


class Channel:
    """One session's sealed messages, in both directions (each side holds one)."""

    def __init__(self, secret: bytes, node: str, master_nonce: bytes, worker_nonce: bytes) -> None:
        self._key = _mac(secret, b"session", node.encode(), master_nonce, worker_nonce)
        self._sent = 0
        self._heard = 0

    def seal(self, kind: str, data: Any) -> dict[str, Any]:
        import msgpack  # Locust's dependency: here, not at import, so options load without it

        self._sent += 1
        body = msgpack.packb(data, use_bin_type=True)
        return {"b": body, "n": self._sent, "mac": self._seal_mac(kind, self._sent, body)}

    def open(self, kind: str, envelope: Any) -> tuple[bool, Any]:
        """(True, data) for a sealed message of `kind` newer than the last one heard;
        (False, None) for anything else: unsealed, forged, changed, replayed or reordered."""
        if not isinstance(envelope, dict):
            return False, None
        body, n, mac = envelope.get("b"), envelope.get("n"), envelope.get("mac")
        if not isinstance(body, bytes) or type(n) is not int or not isinstance(mac, bytes):
            return False, None
        if n <= self._heard or not hmac.compare_digest(self._seal_mac(kind, n, body), mac):
            return False, None
        import msgpack

        try:
            data = msgpack.unpackb(body, raw=False, strict_map_key=False)
        except Exception:  # sealed by the peer, yet not msgpack: drop it
            return False, None
        self._heard = n
        return True, data

    def _seal_mac(self, kind: str, n: int, body: bytes) -> bytes:
        return _mac(self._key, kind.encode(), n.to_bytes(8, "big"), body)


def _mac(key: bytes, *parts: bytes) -> bytes:
    # Length-prefixed parts: ("ab", "c") and ("a", "bc") must not give the same MAC.
    h = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.digest()
