"""False refusals: requests the target refused while it had a free slot.

A zero-queue server refuses only when it is full. A refusal is false when, across its
window (the refusal's send to its answer), fewer of this run's admitted requests were in
flight than the target's capacity. The accusation is kept conservative at each step:

occupancy   the admitted (2xx) requests whose [send, end + grace] overlaps the refusal's
            [send, end]. The client's span of a request holds the server's (it sends before
            the server receives, it reads the last byte after the server writes it), and the
            grace (`[outcomes] margin`, 20 ms) covers a server that frees the slot a moment
            after writing the last byte: occupancy is never below the server's own count of
            this run's requests.
capacity    best first: stated by the target before the load (GET /health `slots` and the
            like: zqbench.target.capacity); the peak of its own running-requests gauge over
            the run (server_queue.running, an engine's /metrics); else an estimate, the most
            requests this run had admitted at once, each counted from a grace after its send
            to a grace before its end, so that two requests in transit at a turnover are
            not counted together (the estimate is then never above the truth).
the gauge   where the target's running gauge was scraped, a refusal next to a scrape (the
            one before it or after it) that read the gauge at or above capacity is not
            false: the server was full by its own count, with requests this run cannot see
            (another client's) included.

Other clients' requests are invisible without the gauge: a refusal of a server shared
with other traffic may be called false when it was full. docs/metrics.md says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zqbench import summary as model
from zqbench.metrics.frame import NS_PER_S, MetricFrame

MAX_LISTED = 200  # false refusals listed with their times in summary.json


@dataclass(frozen=True)
class Judged:
    """One value per request of the frame, in its order."""

    occupancy: np.ndarray  # float64: admitted requests in flight across a refusal, else NaN
    false: np.ndarray  # bool: a refusal made while a slot was free
    capacity: model.Capacity | None  # None: nothing to judge by
    grace_s: float

    def columns(self) -> dict[str, np.ndarray]:
        """The samples.parquet columns."""
        return {"refusal_occupancy": self.occupancy, "false_refusal": self.false}


def _admitted_spans(frame: MetricFrame) -> tuple[np.ndarray, np.ndarray]:
    """(send, end) in ns of every request the target admitted (a 2xx head)."""
    c = frame.columns
    keep = (c.status >= 200) & (c.status < 300) & ~np.isnan(c.t_send) & ~np.isnan(c.t_end)
    return c.t_send[keep], c.t_end[keep]


def peak_in_flight(send: np.ndarray, end: np.ndarray) -> int:
    """The most [send, end) spans open at once (an end at a send's moment has ended)."""
    if not len(send):
        return 0
    starts, ends = np.sort(send), np.sort(end)
    # At each start: spans started by then minus spans ended by then.
    open_now = np.arange(1, len(starts) + 1) - np.searchsorted(ends, starts, side="right")
    return int(open_now.max())


def most_at_once(send: np.ndarray, end: np.ndarray, grace_ns: float) -> int:
    """The most spans open at once, each shrunk by a grace (at most a quarter of its length)
    at both ends: a turnover's two requests in transit never count together."""
    trim = np.minimum(grace_ns, (end - send) / 4.0)
    return peak_in_flight(send + trim, end - trim)


def overlapping(
    send: np.ndarray,
    end: np.ndarray,
    admitted_send: np.ndarray,
    admitted_end: np.ndarray,
    grace: float,
) -> np.ndarray:
    """Per refusal [send, end]: the admitted spans [send, end + grace] overlapping it."""
    starts, stops = np.sort(admitted_send), np.sort(admitted_end + grace)
    # Overlapping: started before its end, minus those stopped by its send (which began before).
    over: np.ndarray = np.searchsorted(starts, end) - np.searchsorted(stops, send, side="right")
    return over


def capacity_of(
    basis: model.OutcomeBasis,
    server_queue: model.ServerQueue | model.Unavailable | None,
    send: np.ndarray,
    end: np.ndarray,
    grace_ns: float,
) -> model.Capacity | None:
    """The capacity, best source first (the module's docstring)."""
    if basis.capacity is not None:
        return basis.capacity
    running = server_queue.running if isinstance(server_queue, model.ServerQueue) else None
    if isinstance(running, model.GaugeSummary) and int(running.max) >= 1:
        return model.Capacity(
            value=int(running.max),
            source="running_gauge",
            detail=f"max {running.metric} over the run",
        )
    seen = most_at_once(send, end, grace_ns)
    if seen < 1:
        return None
    return model.Capacity(
        value=seen,
        source="estimate",
        detail="the most requests this run had admitted at once",
    )


def _full_by_gauge(
    frame: MetricFrame,
    refused: np.ndarray,
    server_queue: model.ServerQueue | model.Unavailable | None,
    cap: int,
) -> np.ndarray:
    """Per request: a refusal whose neighbouring scrape read the running gauge >= cap."""
    full = np.zeros(frame.n, dtype=bool)
    if not isinstance(server_queue, model.ServerQueue) or not refused.any():
        return full
    series = server_queue.over_time
    at_cap = np.array([r is not None and r >= cap for r in series.running], dtype=bool)
    if not len(at_cap) or not at_cap.any():
        return full
    t = np.asarray(series.t, dtype=np.float64)
    sent = frame.columns.t_send[refused] / NS_PER_S
    after = np.searchsorted(t, sent, side="left")  # the first scrape at or after the send
    # The scrape before the send is at_cap[after - 1], the one after at_cap[after]; none
    # before the first scrape or after the last (the padding's False).
    padded = np.concatenate(([False], at_cap, [False]))
    full[refused] = padded[after] | padded[after + 1]
    return full


def judge(
    frame: MetricFrame,
    refused: np.ndarray,
    basis: model.OutcomeBasis,
    server_queue: model.ServerQueue | model.Unavailable | None,
) -> Judged:
    """Every refusal's occupancy, and whether it was false (vectorised)."""
    grace_s = basis.rules.margin
    grace_ns = grace_s * NS_PER_S
    send, end = _admitted_spans(frame)
    cap = capacity_of(basis, server_queue, send, end, grace_ns)
    c = frame.columns
    occ = np.full(frame.n, np.nan)  # per refusal: the admitted spans overlapping it
    occ[refused] = overlapping(c.t_send[refused], c.t_end[refused], send, end, grace_ns)
    false = np.zeros(frame.n, dtype=bool)
    if cap is not None:
        false = refused & (occ < cap.value)
        false &= ~_full_by_gauge(frame, refused, server_queue, cap.value)
    return Judged(occupancy=occ, false=false, capacity=cap, grace_s=grace_s)


def false_refusals_summary(
    frame: MetricFrame, judged: Judged, refused: np.ndarray
) -> model.FalseRefusals | model.Unavailable:
    if judged.capacity is None:
        return model.Unavailable(
            unavailable="no request was admitted and the target stated no capacity: "
            "nothing to judge refusals by"
        )
    count = int(np.count_nonzero(judged.false))
    refusals = int(np.count_nonzero(refused))
    listed = np.flatnonzero(judged.false)
    listed = listed[np.argsort(frame.columns.t_send[listed], kind="stable")][:MAX_LISTED]
    return model.FalseRefusals(
        capacity=judged.capacity,
        grace=judged.grace_s,
        refusals=refusals,
        count=count,
        rate=count / max(1, frame.n),
        share_of_refusals=count / refusals if refusals else None,
        by_stage={
            str(s): model.FalseRefusalStage(
                refusals=int(np.count_nonzero(refused & (frame.stage == s))),
                false=int(np.count_nonzero(judged.false & (frame.stage == s))),
            )
            for s in frame.stages
        },
        t=[round(float(x) / NS_PER_S, 6) for x in frame.columns.t_send[listed]],
        occupancy=[int(x) for x in judged.occupancy[listed]],
    )
