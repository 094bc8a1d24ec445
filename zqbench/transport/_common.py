"""Helpers the transports share: opening a connection, failure messages, the deadline."""

from __future__ import annotations

import abc
import asyncio
import heapq
import os
import socket
import ssl
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

from zqbench.transport.base import ConnectError, PoolLimits, RequestTimeout
from zqbench.transport.origin import Origin, parse_base_url
from zqbench.transport.stamped import StampedTransport, kernel_stamps_ready, stamps_supported

P = TypeVar("P", bound=asyncio.Protocol)

# Plain-TCP connections read through StampedTransport (stamped by the kernel, #43). False:
# the loop's own transport, each read stamped when its callback runs.
STAMPED_READS = True


class PoolBase(abc.ABC):
    """What every transport is built from: the origin, the pool's limits, and whether TLS
    certificates go unverified. Each transport sets up its own state in `_setup`."""

    def __init__(
        self, base_url: str, limits: PoolLimits | None = None, *, insecure: bool = False
    ) -> None:
        self.origin: Origin = parse_base_url(base_url)
        self.limits = limits or PoolLimits()
        self.insecure = insecure
        self.timeouts = Timeouts()  # every send's Deadline, under one timer
        self._setup()

    @abc.abstractmethod
    def _setup(self) -> None:
        """The transport's own state (its connections, its permits)."""

    async def open(self) -> None:
        """Open the pool (`_open`); on any failure, close what it opened, then raise."""
        try:
            await self._open()
        except BaseException:
            await self.close()
            raise

    @abc.abstractmethod
    async def _open(self) -> None:
        """Resolve the target and open the pool's first connections."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close every connection."""


def reason(e: BaseException) -> str:
    """A failure in a few words, for a one-line message: the OS's text for an errno
    ("Connection refused", not asyncio's multi-part text), else its first line, else its type."""
    if isinstance(e, OSError) and e.errno and not isinstance(e, ssl.SSLError):
        return os.strerror(e.errno)
    return first_line(e)


def first_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return text or type(e).__name__


def cannot_connect(origin: Origin, why: str) -> ConnectError:
    return ConnectError(f"cannot connect to {origin.address}: {why}")


def no_answer(origin: Origin, timeout_s: float) -> ConnectError:
    return cannot_connect(origin, f"no answer within {timeout_s:g} s")


async def open_connection(
    factory: Callable[[], P],
    origin: Origin,
    timeout_s: float,
    *,
    ssl_ctx: ssl.SSLContext | None,
    address: tuple[int, str, int] | None = None,
) -> P:
    """`loop.create_connection` bounded by the connect timeout; every failure is a ConnectError.

    `address` is an already resolved (family, ip, port); without it the loop resolves
    `origin.host`. TLS verifies against `origin.host` either way."""
    family, host, port = address or (0, origin.host, origin.port)
    task = asyncio.current_task()
    cancels = _cancels(task)
    if ssl_ctx is None and STAMPED_READS and await kernel_stamps_ready():
        return await _open_stamped(factory, origin, timeout_s, (family, host, port), cancels)
    try:
        transport, protocol = await asyncio.wait_for(
            asyncio.get_running_loop().create_connection(
                factory,
                host,
                port,
                family=family,
                ssl=ssl_ctx,
                server_hostname=origin.host if ssl_ctx is not None else None,
            ),
            timeout_s,
        )
    except asyncio.TimeoutError:  # before OSError: TimeoutError subclasses it
        raise no_answer(origin, timeout_s) from None
    except OSError as e:  # refused, unreachable, TLS handshake or verification
        raise cannot_connect(origin, reason(e)) from None
    if _cancels(task) > cancels:
        # Before Python 3.12, wait_for hands back a connection that completed as the task
        # was cancelled, the cancel lost: a send cut at the run's end went on to a target
        # that never answered, past its deadline, and the run ended without its row (#44).
        transport.close()
        raise asyncio.CancelledError
    return protocol


async def _open_stamped(
    factory: Callable[[], P],
    origin: Origin,
    timeout_s: float,
    address: tuple[int, str, int],
    cancels: int,
) -> P:
    """`open_connection` on a StampedTransport: a socket of our own whose reads carry the
    kernel's arrival time; the loop's transport on it where the kernel does not stamp."""
    loop = asyncio.get_running_loop()
    try:
        sock, stamped = await asyncio.wait_for(_connected_socket(address), timeout_s)
    except asyncio.TimeoutError:  # before OSError: TimeoutError subclasses it
        raise no_answer(origin, timeout_s) from None
    except OSError as e:
        raise cannot_connect(origin, reason(e)) from None
    transport: asyncio.BaseTransport
    if stamped:
        protocol = factory()
        transport = StampedTransport(loop, sock, protocol)  # type: ignore[arg-type]
    else:
        transport, protocol = await loop.create_connection(factory, sock=sock)
    if _cancels(asyncio.current_task()) > cancels:
        transport.close()  # as in open_connection: a cancel must not be lost
        raise asyncio.CancelledError
    return protocol


async def _connected_socket(address: tuple[int, str, int]) -> tuple[socket.socket, bool]:
    """A non-blocking TCP socket connected to the first of `address`'s addresses that
    answers, and whether its reads are stamped by the kernel."""
    loop = asyncio.get_running_loop()
    family, host, port = address
    infos = await loop.getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM)
    error: OSError = OSError(f"no address for {host}")
    for fam, kind, proto, _, addr in infos:
        sock = socket.socket(fam, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            stamped = stamps_supported(sock)
            await loop.sock_connect(sock, addr)
        except OSError as e:
            sock.close()
            error = e
            continue
        except BaseException:  # cancelled or timed out: the socket is nobody's
            sock.close()
            raise
        return sock, stamped
    raise error


def _cancels(task: asyncio.Task[object] | None) -> int:
    """The cancels asked of `task` and not withdrawn (Python 3.11's count; 0 before)."""
    if sys.version_info >= (3, 11) and task is not None:
        return task.cancelling()
    return 0


class Timeouts:
    """Every Deadline of one transport, in buckets by when they are due, under one timer.

    A timer handle a request cost about 9 µs at 10,000 req/s (uvloop gives each its own libuv
    timer, armed and cancelled); a set entry costs well under one. A bucket spans 1 ms, or a
    ten-thousandth of its timeout where that is longer (6 ms of the default 60 s), so that at
    most 10,000 of them are pending for a timeout, empty or not; a deadline fires in the first
    sweep at or after its bucket's end (libuv's timers have 1 ms resolution anyway). Like its
    transport, it serves one event loop: its timer is set on the loop of the first deadline."""

    __slots__ = ("_armed", "due", "keys")

    def __init__(self) -> None:
        self.due: dict[int, set[Deadline]] = {}  # bucket end (µs of loop time) -> deadlines
        self.keys: list[int] = []  # heap of the bucket ends
        self._armed = 0  # the bucket end the timer is set for; 0: not set

    def add(self, deadline: Deadline, loop: asyncio.AbstractEventLoop) -> set[Deadline]:
        """File `deadline`; the bucket it is in (it leaves it when it ends)."""
        timeout_s = deadline.timeout_s
        span = max(1000, int(timeout_s * 100))
        # A microsecond over, so that no rounding of the float clock fires it early.
        key = -(-(int((loop.time() + timeout_s) * 1e6) + 1) // span) * span
        bucket = self.due.get(key)
        if bucket is None:
            bucket = self.due[key] = set()
            heapq.heappush(self.keys, key)
            if not self._armed or key < self._armed:
                self._arm(key, loop)
        bucket.add(deadline)
        return bucket

    def _arm(self, key: int, loop: asyncio.AbstractEventLoop) -> None:
        # A timer set for a later key is not cancelled (its handle would hold the loop): it
        # finds it is no longer the armed one and does nothing.
        self._armed = key
        loop.call_at(key / 1e6, self._sweep, key, loop)

    def _sweep(self, key: int, loop: asyncio.AbstractEventLoop) -> None:
        if key != self._armed:
            return
        self._armed = 0
        now = loop.time() * 1e6
        keys = self.keys
        while keys and keys[0] <= now:
            for deadline in self.due.pop(heapq.heappop(keys)):
                deadline.fire()
        if keys:
            self._arm(keys[0], loop)


class Deadline:
    """`with Deadline(s, timeouts):` cancels the current task after `s` seconds and raises
    RequestTimeout; `timeouts` is the transport's, which times them all.

    A cancel that comes from outside (the run stopping) still propagates as CancelledError;
    only our own timer becomes a timeout. Works on Python 3.10 (no asyncio.timeout there).
    """

    __slots__ = ("_bucket", "_task", "_timeouts", "fired", "timeout_s")

    def __init__(self, timeout_s: float, timeouts: Timeouts) -> None:
        self.timeout_s = timeout_s
        self.fired = False
        self._timeouts = timeouts

    def __enter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("Deadline needs a running task")
        self._task = task
        self._bucket = self._timeouts.add(self, task.get_loop())
        return self

    def fire(self) -> None:
        """The timeout: cancel the task (exit makes it a RequestTimeout)."""
        self.fired = True
        self._task.cancel()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._bucket.discard(self)  # an empty bucket stays until its time: 10,000 at most
        # Our cancel may surface as CancelledError or as whatever a library made of it.
        if self.fired and et is not None:
            if sys.version_info >= (3, 11) and self._task.cancelling():
                # A cancel from outside in the same instant (the run's end cutting it) is
                # the one that counts: made a timeout, it was lost, and a session sent its
                # next turn after the drain, with no row for it (#44 item 2).
                if self._task.uncancel():
                    raise asyncio.CancelledError
            raise RequestTimeout(f"no complete response within {self.timeout_s:g} s") from None


def now_ns() -> int:
    return time.perf_counter_ns()
