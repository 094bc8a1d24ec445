"""The capture window, and `CaptureHook`, which opens and closes it at its edges.

    --capture-stage NAME       the window is that stage of the scenario
    --capture-window START:END seconds since t = 0 (the schedule's start)

The hook is a run hook (zqbench.hooks.contract): a `WindowTimer` thread sleeps until the
window's start, POSTs /start_profile, sleeps until its end, POSTs /stop_profile, on the run's
monotonic clock, as the packet-loss hook applies its rules at a stage's edges. `stop()` closes a
window still open (a run ended or interrupted early), so the server never stays profiling.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from zqbench.errors import OptionError, ZqbenchError
from zqbench.hooks.contract import HookContext, HookResult
from zqbench.hooks.windows import WindowTimer
from zqbench.load.spans import StageInfo
from zqbench.option_values import read_api_key
from zqbench.target import control

_JOIN_TIMEOUT_S = 30.0  # a torch trace is written inside /stop_profile
_CALL_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class WindowSpec:
    """What the user asked: a stage name, START:END seconds, or (neither) the whole run."""

    stage: str | None = None
    start_s: float = 0.0
    end_s: float = 0.0
    whole_run: bool = False

    @classmethod
    def parse(cls, stage: str | None, window: str | None) -> WindowSpec:
        if stage is not None and window is not None:
            raise OptionError(
                "capture", "give one of --capture-stage NAME or --capture-window START:END"
            )
        if stage is None and window is None:
            return cls(whole_run=True)
        if stage is not None:
            return cls(stage=stage)
        assert window is not None
        start, sep, end = window.partition(":")
        try:
            spec = cls(start_s=float(start), end_s=float(end))
        except ValueError:
            spec = None
        if not sep or spec is None or not 0 <= spec.start_s < spec.end_s:
            raise OptionError(
                "capture_window", "expected START:END seconds, 0 <= START < END", value=window
            )
        return spec

    def resolve(self, stages: Sequence[StageInfo]) -> tuple[float, float]:
        """(start_s, end_s) since t = 0."""
        if self.whole_run:
            return (stages[0].start_s, stages[-1].end_s) if stages else (0.0, 0.0)
        if self.stage is None:
            return self.start_s, self.end_s
        for stage in stages:
            if stage.name == self.stage:
                return stage.start_s, stage.end_s
        names = ", ".join(s.name for s in stages if s.name) or "none named"
        raise OptionError(
            "capture_stage",
            f"no such stage in the scenario (its stages: {names})",
            value=self.stage,
        )


@dataclass
class CaptureLog:
    """When the capture surely ran (seconds since t = 0): from the answer of /start_profile
    to the call of /stop_profile; and what failed."""

    window: tuple[float, float] = (0.0, 0.0)
    started_at: float | None = None
    stopped_at: float | None = None
    errors: list[str] = field(default_factory=list)


class CaptureHook:
    """Opens the capture at the window's start and closes it at its end."""

    name = "profile-capture"

    def __init__(
        self, spec: WindowSpec, *, base_url: str | None = None, api_key_env: str | None = None
    ) -> None:
        self.spec = spec
        self.base_url = base_url  # None: the run's target (HookContext.base_url)
        self.api_key = read_api_key(api_key_env)
        self.log = CaptureLog()
        self._lock = threading.Lock()
        self._timer = WindowTimer("zqbench-profile-window", self._switch, self.log.errors.append)
        self._open = False

    def start(self, ctx: HookContext) -> None:
        self.log.window = self.spec.resolve(ctx.stages)
        self.base_url = (self.base_url or ctx.base_url).rstrip("/")
        self._timer.start(ctx.start_monotonic_ns, [self.log.window])

    def _switch(self, on: bool) -> None:
        with self._lock:
            if on and self._timer.stopping.is_set():
                return
            if not on and not self._open:
                return
            route = "/start_profile" if on else "/stop_profile"
            t_s = self._timer.seconds()
            try:
                with control.ControlClient(timeout_s=_CALL_TIMEOUT_S) as client:
                    client.post_json(f"{self.base_url}{route}", b"{}", headers=self._headers())
            except ZqbenchError as exc:
                self.log.errors.append(f"POST {route}: {exc.message}")
                return
            self._open = on
            # The capture surely ran from /start_profile's answer to /stop_profile's call.
            if on:
                self.log.started_at = round(self._timer.seconds(), 3)
            else:
                self.log.stopped_at = round(t_s, 3)

    def _headers(self) -> list[tuple[str, str]]:
        headers = [("content-type", "application/json")]
        if self.api_key:
            headers += [("x-api-key", self.api_key), ("authorization", f"Bearer {self.api_key}")]
        return headers

    def stop(self) -> HookResult:
        self._timer.stop(_JOIN_TIMEOUT_S)
        self._switch(False)  # a window still open: close it now
        result = HookResult()
        result.notes.extend(f"profile: {e}" for e in self.log.errors[:1])
        return result
