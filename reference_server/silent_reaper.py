"""Close accepted connections that have not sent a single byte within the idle timeout.

Granian's HTTP/1 header-read timeout closes a connection that goes quiet after a request
or in the middle of its headers, but in `--http auto` (HTTP/1.1 and h2c on one port) the
first bytes are read to detect the protocol before that timer exists: a client that
connects and sends nothing holds its connection, and one of the `--max-connections`
slots, forever. Granian offers no setting for it, so this task looks at the process's
own sockets (Linux: /proc/self/fd and TCP_INFO) and shuts down those on the server's
port that have received nothing for the idle timeout. Granian then sees the end of the
stream and frees the slot. Elsewhere the task does nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
import sys

log = logging.getLogger("reference_server")

# struct tcp_info (linux/tcp.h): tcpi_state (u8) at byte 0, tcpi_last_data_recv (ms, u32)
# at byte 52, tcpi_bytes_received (u64) at byte 128.
_TCP_INFO_LEN = 136
_TCP_ESTABLISHED = 1
_LAST_DATA_RECV = struct.Struct("=I")
_BYTES_RECEIVED = struct.Struct("=Q")


def supported() -> bool:
    return sys.platform == "linux" and os.path.isdir("/proc/self/fd")


async def run(port: int, idle_timeout_s: float) -> None:
    """Every quarter of the timeout (at most 1 s), close silent connections on `port`."""
    period = min(1.0, idle_timeout_s / 4)
    idle_ms = idle_timeout_s * 1000
    while True:
        await asyncio.sleep(period)
        try:
            await asyncio.to_thread(reap, port, idle_ms)
        except OSError as exc:  # e.g. out of fds for the copy: try again next round
            log.warning("silent-connection reaper: %s", exc)


def reap(port: int, idle_ms: float) -> int:
    """Shut down this process's TCP connections on local `port` that have received no
    byte since they opened, at least `idle_ms` ago. Returns how many."""
    closed = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            dup = os.dup(int(name))  # our own copy: the fd may be closed meanwhile
        except OSError:
            continue
        with socket.socket(fileno=dup) as sock:
            if not _silent(sock, port, idle_ms):
                continue
            try:
                sock.shutdown(socket.SHUT_RDWR)  # acts on the connection, not just our copy
            except OSError:  # closed by its peer meanwhile
                continue
            closed += 1
    return closed


def _silent(sock: socket.socket, port: int, idle_ms: float) -> bool:
    try:
        if sock.type != socket.SOCK_STREAM or sock.family not in (socket.AF_INET, socket.AF_INET6):
            return False
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):  # the listener
            return False
        if sock.getsockname()[1] != port:
            return False
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
    except OSError:  # not connected, or closed under us
        return False
    if len(info) < _TCP_INFO_LEN or info[0] != _TCP_ESTABLISHED:
        return False  # not a connection (granian also holds a bound, unconnected socket)
    (received,) = _BYTES_RECEIVED.unpack_from(info, 128)
    # With nothing received, the last receive time is the connection's start.
    (last_recv_ms,) = _LAST_DATA_RECV.unpack_from(info, 52)
    return received == 0 and last_recv_ms >= idle_ms
