"""Does the target admit a refused request when its Retry-After said? The follow-ups' tries
(retry_after.parquet, zqbench.engines.follow_up) -> summary.json's `retry_after_follow_up`.

Each followed refusal ends one way, judged by its last try:

    honoured            admitted (2xx) at the first try, sent when the Retry-After said
    admitted_later      admitted at a later try, each sent at the previous refusal's own
                        Retry-After; its time to admission runs from the first refusal's end
                        to the admitting try's send
    refused_throughout  refused at every try (or refused at last without a Retry-After)
    failed              a try that ended in neither (a timeout, a reset, another status)
    ended_with_run      the run ended first (waiting, or a try in flight)

`honoured_share` is over the followed refusals whose first try was answered.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from zqbench.metrics.classify import REFUSAL_STATUSES
from zqbench.metrics.frame import NS_PER_S
from zqbench.summary import RetryAfterFollowUp, json_number

CUT = ("ended_with_run", "stopped")  # a try cut by the run, not answered by the target


def follow_up_summary(tries: pd.DataFrame, *, asked: int, attempts: int) -> RetryAfterFollowUp:
    counts = {"honoured": 0, "admitted_later": 0, "refused": 0, "failed": 0, "cut": 0}
    to_admission: list[float] = []
    tried = 0
    for _, group in tries.groupby(["worker", "request_id", "t_refused"], sort=True):
        g = group.sort_values("attempt")
        first = g.iloc[0]
        if first["error"] not in CUT:
            tried += 1
        admitted = g[(g["status"] >= 200) & (g["status"] < 300) & g["error"].isna()]
        last = g.iloc[-1]
        if len(admitted):
            hit = admitted.iloc[0]
            if hit["attempt"] == 1:
                counts["honoured"] += 1
            else:
                counts["admitted_later"] += 1
                to_admission.append(round((hit["t_send"] - hit["t_refused"]) / NS_PER_S, 6))
        elif last["error"] in CUT:
            counts["cut"] += 1
        elif int(last["status"]) in REFUSAL_STATUSES:
            counts["refused"] += 1
        else:
            counts["failed"] += 1
    sent = tries.dropna(subset=["t_send"])
    late = (sent["t_send"] - sent["t_due"]).to_numpy(dtype=np.float64) / NS_PER_S
    return RetryAfterFollowUp(
        asked=asked,
        attempts=attempts,
        followed=int(tries.groupby(["worker", "request_id", "t_refused"]).ngroups),
        extra_requests=len(sent),
        tried=tried,
        honoured=counts["honoured"],
        honoured_share=counts["honoured"] / tried if tried else None,
        admitted_later=counts["admitted_later"],
        to_admission=sorted(to_admission),
        refused_throughout=counts["refused"],
        failed=counts["failed"],
        ended_with_run=counts["cut"],
        send_late_p99=json_number(float(np.quantile(late, 0.99))) if len(late) else None,
    )
