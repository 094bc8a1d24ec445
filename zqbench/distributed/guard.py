"""The master's door: every frame that reaches its port is checked before Locust or zqbench
acts on it, and what does not pass is dropped and counted, never raised.

Locust's listener is one greenlet that trusts its peers: a frame that is not msgpack, a
message of the wrong arity, or a heartbeat whose data is a list raises inside it, the
greenlet dies, and the master hears nothing more. Here the frame is parsed first, the
message's claimed sender must be the ZeroMQ identity it arrived under (else anyone could
speak for a worker that proved itself), only the message types a zqbench worker sends get
through, each with the data shape its handler reads, and joins are bounded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from zqbench.distributed import protocol as p
from zqbench.printable import shown

MAX_NODE_CHARS = 256  # Locust's ids are `hostname_<32 hex>`
MAX_PENDING = 64  # Locust clients that joined but have not proven the secret yet
# Locust's own messages that a zqbench worker's runner sends and the master has no use for.
IGNORED = frozenset({"stats", "spawning", "spawning_complete", "client_stopped", "logs"})
# What may reach Locust's handlers; zqbench's own messages are then checked by the
# master's (sealed, typed).
ACCEPTED = IGNORED | {"quit", "client_ready", "heartbeat", *p.WORKER_MESSAGES}

Note = Callable[[str, str, str], None]  # (reason, node, detail)


class Door:
    """Installed on a Locust MasterRunner: `Door(runner, is_member, note).install()`."""

    def __init__(self, runner: Any, is_member: Callable[[str], bool], note: Note) -> None:
        self.runner = runner
        self.is_member = is_member  # has this node proven the secret?
        self.note = note
        self.dropped: Counter[str] = Counter()
        self._joined: list[str] = []  # unproven Locust clients, oldest first

    def install(self) -> None:
        server = self.runner.server
        self._recv_frames = server.socket.recv_multipart
        server.recv_from_client = self._recv_from_client
        self._handle = self.runner.handle_message
        self.runner.handle_message = self._handle_message

    def drop(self, reason: str, node: str, detail: str = "") -> None:
        self.dropped[reason] += 1
        self.note(reason, node, detail)

    # ------------------------------------------------------------------ frames
    def _recv_from_client(self) -> tuple[str, Any]:
        """Locust's Server.recv_from_client, that returns only well-formed messages."""
        from locust.exception import RPCError
        from locust.rpc.protocol import Message
        from zmq.error import ZMQError

        while True:
            try:
                frames = self._recv_frames()
            except ZMQError as exc:
                raise RPCError("ZMQ network broken") from exc
            node = _printable(frames[0]) if frames else "?"
            try:
                msg = _parse(frames, Message)
            except ValueError as exc:
                self.drop("malformed frame", node, str(exc))
                continue
            return msg.node_id, msg

    # ------------------------------------------------------------------ messages
    def _handle_message(self, client_id: str, msg: Any) -> None:
        why = self._refusal(msg)
        if why is not None:
            self.drop(why[0], client_id, why[1])
            return
        if msg.type in IGNORED:
            return
        if msg.type == "client_ready":
            self._admit(client_id)
        try:
            self._handle(client_id, msg)
        except Exception as exc:  # Locust's own handling must not end the listener
            self.drop("malformed content", client_id, f"{msg.type}: {type(exc).__name__}")

    def _refusal(self, msg: Any) -> tuple[str, str] | None:
        """(reason, detail) of a message dropped here; None for one that goes on."""
        kind, data = msg.type, msg.data
        if kind == "client_ready" and not (isinstance(data, str) and len(data) <= 64):
            return "malformed content", "client_ready without a version string"
        if kind == "heartbeat" and not _heartbeat_ok(data):
            return "malformed content", "a heartbeat without its state and usage numbers"
        if kind in ACCEPTED:
            return None
        return "unexpected message", repr(kind)[:40]

    def _admit(self, node: str) -> None:
        """Bound Locust's client table: at most MAX_PENDING clients wait to prove the secret;
        past that the oldest is forgotten (a real worker proves itself in milliseconds)."""
        if self.is_member(node) or node in self._joined:
            return
        self._joined.append(node)
        self._joined = [n for n in self._joined if not self.is_member(n)]
        while len(self._joined) > MAX_PENDING:
            oldest = self._joined.pop(0)
            self.runner.clients.pop(oldest, None)
            self.drop("too many joins", oldest, f"more than {MAX_PENDING} unproven workers")

    def forget(self, node: str) -> None:
        """A client refused for good (a wrong secret): out of Locust's table too."""
        if node in self._joined:
            self._joined.remove(node)
        self.runner.clients.pop(node, None)


def _parse(frames: list[bytes], message: Any) -> Any:
    """[identity, msgpack (type, data, node_id)] -> a Locust Message; ValueError says why."""
    import msgpack

    if len(frames) != 2:
        raise ValueError(f"{len(frames)} frames, not 2")
    try:
        identity = frames[0].decode()
        decoded = msgpack.unpackb(frames[1], raw=False, strict_map_key=False)
    except Exception as exc:  # any garbage: msgpack raises many kinds
        raise ValueError(f"not msgpack ({type(exc).__name__})") from None
    if not isinstance(decoded, (list, tuple)) or len(decoded) != 3:
        raise ValueError("not a (type, data, node_id) triple")
    kind, data, node_id = decoded
    if not isinstance(kind, str) or not isinstance(node_id, str):
        raise ValueError("type and node_id must be strings")
    if node_id != identity or not 0 < len(node_id) <= MAX_NODE_CHARS:
        raise ValueError("node_id is not the identity it arrived under")
    return message(kind, data, node_id)


def _heartbeat_ok(data: Any) -> bool:
    if not isinstance(data, dict) or not isinstance(data.get("state"), str):
        return False
    numbers = [data.get("current_cpu_usage")]
    if "current_memory_usage" in data:
        numbers.append(data["current_memory_usage"])
    return all(p.is_finite_number(x) for x in numbers)


def _printable(raw: bytes) -> str:
    return shown(raw[:MAX_NODE_CHARS].decode("utf-8", "replace"), MAX_NODE_CHARS) or "?"
