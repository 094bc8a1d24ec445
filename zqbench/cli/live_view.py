"""The live progress display of `zqbench run` (rich), and its final one-screen summary."""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from zqbench.engines.live import Progress, WorkerLine
from zqbench.printable import one_line

if TYPE_CHECKING:
    from zqbench.summary import Summary


def _fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _worker_figures(line: WorkerLine, rates: dict[int, float]) -> str:
    rate = rates.get(line.worker)
    lag = "-" if line.lag_p99_ms is None else f"{line.lag_p99_ms:.2f} ms"
    return (
        f"sent {line.sent}  {'-' if rate is None else f'{rate:.0f}'} req/s"
        f"  in flight {line.inflight}  lag p99 {lag}"
    )


class LiveView:
    """Receives merged worker snapshots (any thread) and renders them about 4 times a second."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.console = Console(stderr=True, soft_wrap=True)
        self._lock = threading.Lock()
        self._snap = Progress()
        self._history: deque[tuple[float, int, int]] = deque(maxlen=16)
        # (time, {worker: sent}): each worker's own rate, over the same window
        self._worker_history: deque[tuple[float, dict[int, int]]] = deque(maxlen=16)
        self._t0 = time.monotonic()
        self._live: Live | None = None

    def note(self, message: str) -> None:
        # Plain text, never rich markup or highlighting: a message may quote a target.
        self.console.print(Text.assemble(("zqbench:", "dim"), " ", one_line(message)))

    def update(self, progress: Progress) -> None:
        with self._lock:
            self._snap = progress
            now = time.monotonic()
            self._history.append((now, progress.sent, progress.due))
            self._worker_history.append((now, {w.worker: w.sent for w in progress.per_worker}))

    def _rates(self) -> tuple[float | None, float | None]:
        if len(self._history) < 2:
            return None, None
        t0, sent0, due0 = self._history[0]
        t1, sent1, due1 = self._history[-1]
        dt = t1 - t0
        if dt <= 0:
            return None, None
        offered = (due1 - due0) / dt if due1 else None
        return offered, (sent1 - sent0) / dt

    def _worker_rates(self) -> dict[int, float]:
        if len(self._worker_history) < 2:
            return {}
        (t0, first), (t1, last) = self._worker_history[0], self._worker_history[-1]
        if t1 <= t0:
            return {}
        return {w: (sent - first[w]) / (t1 - t0) for w, sent in last.items() if w in first}

    def __rich__(self) -> Table:
        with self._lock:
            snap = self._snap
            offered, achieved = self._rates()
            worker_rates = self._worker_rates()
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        elapsed = time.monotonic() - self._t0
        table.add_row("stage", str(snap.stage) if snap.workers else "-")
        table.add_row("elapsed", f"{elapsed:.0f} s")
        rate = f"{achieved:.0f} req/s" if achieved is not None else "-"
        if offered is not None:
            rate = f"{rate} (offered {offered:.0f} req/s)"
        table.add_row("sent", f"{snap.sent}  {rate}")
        table.add_row("in flight", str(snap.inflight))
        table.add_row("latency", f"p50 {_fmt_ms(snap.p50_ms)}  p99 {_fmt_ms(snap.p99_ms)}")
        mix = "  ".join(f"{k}: {v}" for k, v in sorted(snap.status.items()))
        table.add_row("status", mix or "-")
        if len(snap.per_worker) > 1:  # each worker's own rate and lag: who falls behind
            for line in snap.per_worker:
                table.add_row(f"worker {line.worker}", _worker_figures(line, worker_rates))
        return table

    def __enter__(self) -> LiveView:
        self._t0 = time.monotonic()
        if self.enabled and sys.stderr.isatty():
            self._live = Live(self, console=self.console, refresh_per_second=4, transient=True)
            self._live.start()  # what Live's own __enter__ does; the renderable is this view
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def final(self, summary: Summary, out_dir: Path) -> None:
        """A few lines any log can keep: the verdict, each SLO, where the outputs are."""
        verdict = summary.verdict
        style = {"pass": "green", "fail": "red", "inconclusive": "yellow"}.get(verdict, "magenta")
        requests = summary.requests
        console = Console(stderr=False, soft_wrap=True)
        console.print(
            Text.assemble(
                ("verdict: ", "bold"),
                (verdict.upper(), f"bold {style}"),
                f"   requests: sent {requests.sent}, ok {requests.ok}, failed {requests.failed}",
            )
        )
        for slo in summary.slos:
            console.print(f"  {slo.verdict:<12} {slo.expr}  {slo.message}")
        if not summary.slos and requests.sent:
            # A pass with no SLO judges nothing: say what it did not check.
            console.print(
                f"  no SLO was set: the verdict checks none of the {requests.failed} failed "
                "requests (add e.g. --slo 'errors:rate<0.01')"
                if requests.failed
                else "  no SLO was set: the verdict checks only that the run was valid"
            )
        validity = summary.validity
        for reason in validity.reasons if not validity.ok else []:
            console.print(f"  [magenta]invalid[/magenta]: {reason}")
        lines = [*server_queue_lines(summary), *prefix_cache_lines(summary)]
        lines += sessions_lines(summary)
        lines += outcome_line(summary)
        lines += stop_lines(summary)
        lines += cut_at_end_lines(summary)
        lines += resent_lines(summary)
        for line in [*lines, *packet_loss_lines(summary)]:
            console.print(line, markup=False, highlight=False)
        console.print(f"outputs: {out_dir}")


def outcome_line(summary: Summary) -> list[str]:
    """Each request's outcome, counted: served, queued, refused fast or slow (and the rest)."""
    from zqbench.outputs import outcomes_view

    return outcomes_view.outcome_line(summary.outcomes)


def cut_at_end_lines(summary: Summary) -> list[str]:
    """The requests the run's end cut, when there were any."""
    from zqbench.outputs import outcomes_view

    text = outcomes_view.cut_at_end_text(summary.cut_at_end)
    return [] if text is None else [text]


def resent_lines(summary: Summary) -> list[str]:
    """The requests sent again on a new connection, when there were any."""
    from zqbench.outputs import outcomes_view

    text = outcomes_view.resent_text(summary.resent)
    return [] if text is None else [text]


def stop_lines(summary: Summary) -> list[str]:
    """What the [stop] rules ended, when the scenario had any."""
    from zqbench.outputs import stop_view

    return list(stop_view.stop_lines(summary.stop))


def prefix_cache_lines(summary: Summary) -> list[str]:
    """The prefix cache, when the server's counters or the responses' usage told of it."""
    from zqbench.outputs import view
    from zqbench.summary import Unavailable

    pc = summary.prefix_cache
    if pc is None or all(isinstance(x, Unavailable) for x in (pc.server, pc.usage)):
        return []  # nothing measured: the report says why
    return ["prefix cache:", *(f"  {label}: {text}" for label, text in view.prefix_cache_rows(pc))]


def sessions_lines(summary: Summary) -> list[str]:
    """A sessions run: the conversations, then TTFT p50 and context by turn."""
    from zqbench.outputs import view

    sessions = view.sessions_view(summary.sessions)
    if sessions is None:
        return []
    by_turn = ", ".join(f"{r.turn}: {r.ttft_p50} ms ({r.prompt_tokens} tok)" for r in sessions.rows)
    facts = [f"  {fact.label}: {fact.value}" for fact in sessions.facts]
    return ["sessions:", *facts, f"  TTFT p50 by turn (prompt tokens): {by_turn}"]


def server_queue_lines(summary: Summary) -> list[str]:
    """The server's queue as its own metrics told it, when they did: a heading naming the
    source, then waiting, running and the queue time."""
    from zqbench.outputs import view
    from zqbench.summary import ServerQueue

    queue = summary.server_queue
    if not isinstance(queue, ServerQueue):
        return []
    rows = [f"  {fact.label}: {fact.value}" for fact in view.server_queue_lines(queue)]
    return [f"server queue {view.queue_source(queue)}:", *rows]


def packet_loss_lines(summary: Summary) -> list[str]:
    """What a packet-loss impairment did, in two lines: the loss and its window, then P99
    under loss against baseline, the error share and the recovery."""
    from zqbench.outputs import view

    loss = summary.packet_loss
    if loss is None:
        return []
    rows = {fact.label: fact.value for fact in view.packet_loss_lines(summary, loss)}
    return [
        f"packet loss: {rows['loss']}; rules in place {rows['rules in place']};"
        f" {rows['dropped packets']} packets dropped",
        f"  latency P99 {rows['latency P99']}; error share under loss"
        f" {rows['error share under loss']}; {view.loss_recovery(loss, brief=True)}",
    ]
