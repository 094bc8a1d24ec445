"""The `[stop]` rules applied while the load runs: progress in, stages (or the run) ended.

`StopWatch.observe` is a progress callback (zqbench.engines.live.Progress, every 0.5 s per
worker). It keeps the answers of the stage under watch (each worker's batches of
LIVE_ANSWER rows, each batch taken once) and the run's in-flight count, and after each
update gives every rule its own window (zqbench.stop.rules.Window) to judge. The first rule
to trip ends the stage or the run through `EndedAt`, which every worker reads before each
send.

The stage under watch is the plan's stage at the present moment; only requests sent in it
count, so a queue still draining from an ended stage never trips the next one. Ending the
last stage ends the run: nothing is left to send.

Each answer is classified by the outcome kernel (zqbench.metrics.classify) that judges the
run after it, with the hold (median time from first token to end) of the run's answers so
far in place of the whole run's.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from zqbench.engines.live import NO_ANSWERS, Progress
from zqbench.load import Work
from zqbench.load.spans import StageInfo
from zqbench.metrics.classify import Answer, allowance, classify, live_batch
from zqbench.stop.config import Rule, StopConfig
from zqbench.stop.ended import EndedAt
from zqbench.stop.rules import Trip, Window
from zqbench.summary import OutcomeBasis, Stop, StopEvent

HOLDS_KEPT = 2048  # the latest holds, for the running median
NS = 1e9


class StopWatch:
    def __init__(
        self,
        config: StopConfig,
        stages: Sequence[StageInfo],
        basis: OutcomeBasis | None,
        ended: EndedAt,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        self.stages = list(stages)
        self.basis = basis
        self.ended = ended
        self.on_note = on_note
        self.start_ns = 0  # t = 0 on time.perf_counter_ns(); 0: not started
        self.events: list[StopEvent] = []
        self._rules = config.rules()
        self._longest_s = max(r.window_s for _, r in self._rules)
        self._taken: dict[int, int] = {}  # worker -> the last batch number taken
        self._stage = -1
        self._answers = NO_ANSWERS  # LIVE_ANSWER rows of the stage under watch
        self._inflight: deque[tuple[float, int]] = deque()
        self._holds: deque[float] = deque(maxlen=HOLDS_KEPT)

    def start(self, start_ns: int) -> None:
        self.start_ns = start_ns

    # ------------------------------------------------------------------ progress in
    def observe(self, progress: Progress) -> None:
        if not self.start_ns or self.ended.run_ended():
            return
        now_s = (time.perf_counter_ns() - self.start_ns) / NS
        stage = self._stage_at(now_s)
        if stage != self._stage:
            self._stage = stage
            self._answers = NO_ANSWERS
            self._inflight.clear()
        self._take(progress)
        self._inflight.append((now_s, progress.inflight))
        self._trim(now_s)
        if stage < 0 or self.ended.stage(stage):
            return
        for _, rule in self._rules:
            trip = rule.judge(self._window(rule.window_s, now_s))
            if trip is not None:
                self._end(rule, trip, stage, now_s)
                return

    def _stage_at(self, t_s: float) -> int:
        for i, s in enumerate(self.stages):
            if s.start_s <= t_s < s.end_s:
                return i
        return -1  # past the plan (the graceful stop): nothing left to end

    def _take(self, progress: Progress) -> None:
        taken = [self._answers]
        for worker, seq, batch in progress.completions:
            if seq <= self._taken.get(worker, 0):
                continue
            self._taken[worker] = seq
            held = batch["hold"][(batch["answer"] == Answer.OK) & (batch["hold"] >= 0)]
            self._holds.extend((held / NS).tolist())
            taken.append(batch[batch["stage"] == self._stage])
        self._answers = np.concatenate(taken)

    def _trim(self, now_s: float) -> None:
        self._answers = self._answers[self._answers["t_end"] >= (now_s - self._longest_s) * NS]
        while self._inflight and self._inflight[0][0] < now_s - self._longest_s:
            self._inflight.popleft()

    # ------------------------------------------------------------------ the rules
    def _window(self, window_s: float, now_s: float) -> Window:
        """The answers that ended in the last `window_s`, classified, with the in-flight
        readings of the same span."""
        rows = self._answers[self._answers["t_end"] >= (now_s - window_s) * NS]
        batch = live_batch(rows)
        hold = float(np.median(self._holds)) if self._holds else None
        classes = classify(batch, self.basis, hold)
        points = [(t, n) for t, n in self._inflight if t >= now_s - window_s]
        return Window(
            outcome=classes.outcome,
            send_s=rows["t_send"] / NS,
            ttft_s=batch.ttft_s,
            server_queue_s=batch.server_queue_s,
            inflight_t_s=np.array([t for t, _ in points]),
            inflight=np.array([n for _, n in points]),
            allowance_s=None if self.basis is None else allowance(self.basis.rules.margin, hold),
        )

    # ------------------------------------------------------------------ the verdict
    def _end(self, rule: Rule, trip: Trip, stage: int, now_s: float) -> None:
        at_ns = self.start_ns + int(now_s * NS)
        self.ended.end_stage(stage, at_ns)
        last = stage == len(self.stages) - 1
        if rule.ends == "run" or last:
            self.ended.end_run(at_ns)
        # The trip's fields (its growth's too) are the event's, beside where and when.
        where = {"ends": rule.ends, "stage": stage, "stage_name": self.stages[stage].name}
        event = {**dataclasses.asdict(trip), **where, "at": now_s}
        self.events.append(StopEvent.model_validate(event))
        if self.on_note is not None:
            what = "the run" if rule.ends == "run" or last else f"stage {self.stages[stage].name}"
            self.on_note(f"stop: {trip.rule} ended {what} at {now_s:.1f} s: {trip.reason}")

    def record(self, works: Sequence[Work]) -> Stop:
        """What the rules ended, with the scheduled requests left unsent because of it."""
        return Stop(
            rules=[name for name, _ in self._rules],
            events=list(self.events),
            ended_run=self.ended.run_ended(),
            not_sent=self.not_sent(works),
        )

    def not_sent(self, works: Sequence[Work]) -> int | None:
        """Requests due after a stage's (or the run's) end, before the stage's planned end
        (the run's: the plan's): the schedule's, so exact; None for a closed loop."""
        total = 0
        for work in works:
            for stage, at_ns in self._cuts():
                start = work.due(at_ns - self.start_ns)
                end = work.due(round(stage.end_s * NS))  # int() would drop the last arrival
                if start is None or end is None:
                    return None
                total += max(0, end - start)
        return total

    def _cuts(self) -> list[tuple[StageInfo, int]]:
        """(the span cut short, when): each ended stage's, or the run's to the plan's end."""
        run = self.ended.run()
        if run:
            whole = StageInfo("run", self.stages[0].start_s, self.stages[-1].end_s)
            cuts = [(whole, run)]
            # Stages ended before the run was: their cut ends where the run's begins.
            for i, s in enumerate(self.stages):
                at = self.ended.stage(i)
                if at and at < run:
                    cut_end = min(s.end_s, (run - self.start_ns) / NS)
                    cuts.append((StageInfo(s.name, s.start_s, cut_end), at))
            return cuts
        return [(s, self.ended.stage(i)) for i, s in enumerate(self.stages) if self.ended.stage(i)]
