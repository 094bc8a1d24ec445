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
        # (time, sent, due, {worker: sent}): the rates, each worker's own too, over a window
        self._history: deque[tuple[float, int, int, dict[int, int]]] = deque(maxlen=16)
        self._t0 = time.monotonic()
        self._live: Live | None = None

    def note(self, message: str) -> None:
        # Plain text, never rich markup or highlighting: a message may quote a target.
        self.console.print(Text.assemble(("zqbench:", "dim"), " ", one_line(message)))

    def update(self, progress: Progress) -> None:
        with self._lock:
            self._snap = progress
            workers = {w.worker: w.sent for w in progress.per_worker}
            self._history.append((time.monotonic(), progress.sent, progress.due, workers))

    def _rates(self) -> tuple[float | None, float | None, dict[int, float]]:
        """The offered and achieved rates, and each worker's, over the window kept."""
        if len(self._history) < 2:
            return None, None, {}
        t0, sent0, due0, first = self._history[0]
        t1, sent1, due1, last = self._history[-1]
        dt = t1 - t0
        if dt <= 0:
            return None, None, {}
        offered = (due1 - due0) / dt if due1 else None
        workers = {w: (sent - first[w]) / dt for w, sent in last.items() if w in first}
        return offered, (sent1 - sent0) / dt, workers

    def __rich__(self) -> Table:
        with self._lock:
            snap = self._snap
            offered, achieved, worker_rates = self._rates()
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
        from zqbench.metrics.sections.text import request_counts  # numpy, as section_lines

        verdict = summary.verdict
        style = {"pass": "green", "fail": "red", "inconclusive": "yellow"}.get(verdict, "magenta")
        requests = summary.requests
        console = Console(stderr=False, soft_wrap=True)
        console.print(
            Text.assemble(
                ("verdict: ", "bold"),
                (verdict.upper(), f"bold {style}"),
                f"   requests: sent {requests.sent:,}: {request_counts(summary)}",
            )
        )

        def say(line: str, *styled: tuple[str, str]) -> None:
            # Plain text, one line each: a line may quote a target (a label of its /metrics),
            # and no target writes a line of its own under the verdict.
            console.print(Text.assemble(*styled, one_line(line)))

        for slo in summary.slos:
            say(f"  {slo.verdict:<12} {slo.expr}  {slo.message}")
        if not summary.slos and requests.sent:
            # A pass with no SLO judges nothing: say what it did not check.
            say(
                f"  no SLO was set: the verdict checks none of the {requests.failed} failed "
                "requests (add e.g. --slo 'errors:rate<0.01')"
                if requests.failed
                else "  no SLO was set: the verdict checks only that the run was valid"
            )
        validity = summary.validity
        for reason in validity.reasons if not validity.ok else []:
            say(reason, ("  ", ""), ("invalid", "magenta"), (": ", ""))
        for line in section_lines(summary):
            say(line)
        say(f"outputs: {out_dir}")


def section_lines(summary: Summary) -> list[str]:
    """Each optional section's lines, in the reports' order (zqbench.metrics.sections)."""
    from zqbench.metrics.sections import SECTIONS  # numpy: not on `import zqbench.cli`

    return [line for section in SECTIONS for line in section.lines(summary)]
