"""`PacketLossHook`: adds the drop rules at each impaired stage's start, removes them at its end.

A `WindowTimer` thread sleeps until the stage boundaries (on the run's monotonic clock,
from the stage times in `HookContext`) and applies or removes the rules. `stop()` always removes
whatever is left, so the rules are gone after a normal end, an error, Ctrl-C or SIGTERM
(the run turns SIGTERM into a graceful stop and then stops its hooks). A process killed
with SIGKILL cannot clean up: `zqbench impair clear` removes what it left.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from zqbench.errors import ZqbenchError
from zqbench.hooks.contract import HookContext, HookResult
from zqbench.hooks.windows import WindowTimer
from zqbench.impair import nft
from zqbench.load.spans import StageInfo
from zqbench.scenario import NetworkConfig

_JOIN_TIMEOUT_S = 15.0


def impaired_windows(
    stages: Sequence[StageInfo], impaired: Sequence[int]
) -> list[tuple[float, float]]:
    """[(start_s, end_s)] of the impaired stages, adjacent ones merged into one window."""
    windows: list[tuple[float, float]] = []
    for i in sorted(set(impaired)):
        stage = stages[i]
        if windows and abs(windows[-1][1] - stage.start_s) < 1e-9:
            windows[-1] = (windows[-1][0], stage.end_s)
        else:
            windows.append((stage.start_s, stage.end_s))
    return windows


class PacketLossHook:
    """Real packet loss to and from the target during the scenario's impaired stages."""

    name = "packet-loss"

    def __init__(self, network: NetworkConfig) -> None:
        if network.impairment != "packet-loss":
            raise ValueError(f"PacketLossHook cannot apply {network.impairment!r}")
        self.network = network
        self._rules: nft.LossRules | None = None
        self._lock = threading.Lock()  # one nft change at a time; none after stop()
        self._applied = False
        self._events: list[dict[str, Any]] = []  # what happened when, for the summary
        self._errors: list[str] = []
        self._timer = WindowTimer("zqbench-packet-loss", self._switch, self._errors.append)
        self._dropped = 0

    def start(self, ctx: HookContext) -> None:
        addresses = nft.resolve(ctx.host, ctx.port)
        self._rules = nft.LossRules(ctx.run_name, addresses, ctx.port, self.network.loss)
        nft.check(self._rules)  # a rule nft rejects fails the run now, before any traffic
        self._timer.start(ctx.start_monotonic_ns, impaired_windows(ctx.stages, self.network.stages))

    def _switch(self, apply: bool) -> None:
        rules = self._rules
        if rules is None:
            return
        with self._lock:
            t_s = round(self._timer.seconds(), 3)
            if apply:
                if self._timer.stopping.is_set():  # stop() cleaned up, or is about to: no re-add
                    return
                nft.apply(rules)
                self._applied = True
                self._events.append({"applied_s": t_s})
                return
            # Remove unconditionally (idempotent): also catches an apply that failed halfway.
            removed = nft.remove(rules.run)
            self._dropped += sum(r.dropped_packets for r in removed)
            if self._applied:
                self._applied = False
                self._events[-1]["removed_s"] = t_s

    def stop(self) -> HookResult:
        self._timer.stop(_JOIN_TIMEOUT_S)
        result = HookResult()
        if self._rules is None:  # start() failed before anything could be applied
            return result
        try:
            self._switch(False)
        except ZqbenchError as exc:
            self._errors.append(exc.message)
            result.notes.append(
                f"packet-loss rules may be left in place ({exc.message}): "
                f"run `zqbench impair clear --run {self._rules.run}`"
            )
        result.environment = {
            "impairment": "packet-loss",
            "loss": self.network.loss,
            "stages": list(self.network.stages),
            "nft_table": f"{nft.FAMILY} {nft.TABLE}",
            "rule_comment": self._rules.comment,
            "addresses": list(self._rules.addresses),
            "port": self._rules.port,
            "windows": self._events,
            "dropped_packets": self._dropped,
        }
        if self._errors:
            result.environment["errors"] = self._errors
            result.notes.extend(f"packet-loss: {e}" for e in self._errors[:1])
        return result
