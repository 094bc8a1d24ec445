"""advice.json, the result of `zqbench sweep --server-cmd`: the typed, versioned contract.

    report = AdviceReport.model_validate_json(text)     # pydantic.ValidationError if malformed
    report.recommendation.label                         # "cap=4", or no recommendation: None

One `SettingResult` per server setting (a combination of the `--server-param` values), in
the order they ran, each read from that setting's run summary (summary.json) with the same
conventions as summary.json itself (zqbench.summary: seconds, "inf", null for no value), or
why the setting never ran (its server exited or never answered: the last lines of its log,
escaped). The `Recommendation` names the setting chosen and why, in one sentence from the
measured figures. Versioned like summary.json (ADVICE_SCHEMA, zqbench.advice/1: a new
optional field keeps it, anything else bumps it); its JSON Schema is generated:

    python -m zqbench.outputs.advice_model > docs/advice.schema.json
"""

from __future__ import annotations

import sys
from typing import Final, Literal, TypeAlias

from pydantic import Field

from zqbench.summary import JsonFloat, StepSlo, Verdict, _Document, _Record, json_schema

ADVICE_SCHEMA: Final = "zqbench.advice/1"

# ran: the scenario ran against it (its verdict says how it did); exited: the command ended
# before the target answered; not_ready: the target did not answer within the ready timeout;
# failed: it answered, but the run could not start or broke off (error says why).
SettingState: TypeAlias = Literal["ran", "exited", "not_ready", "failed"]


class SettingResult(_Record):
    """One server setting: how it was launched, and what its run measured."""

    index: int  # in the order the settings ran, from 0
    values: dict[str, str]  # parameter -> value, in --server-param order
    label: str  # "cap=4 seqs=8": the values as one line
    command: list[str]  # the argv launched, secrets redacted
    target: str  # the URL the run measured, without credentials
    out_dir: str  # the setting's folder inside the sweep folder: its run and server.log
    state: SettingState
    error: str | None  # why it did not run (or broke off); null when it ran
    log_tail: list[str]  # the server log's last lines when it did not run, escaped
    ready_s: float | None  # launch to the first ready answer; null: never ready
    verdict: Verdict | None  # the run's; null: no run
    passed: bool  # verdict "pass": the only one that can be recommended
    sent: int
    admitted: int | None  # served + queued (outcomes); null: outcomes not judged
    queued: int | None  # of admitted, those that waited in a queue
    refused: int | None  # refused fast or slow
    false_refusals: int | None  # refused while a slot was free; null: not judged
    duration: float | None  # the run's seconds
    admitted_per_s: float | None  # admitted / duration: work the server took and did
    queued_share: float | None  # queued / admitted; null: none admitted
    refusal_share: float | None  # refused / sent; null: none sent
    ttft_p99: JsonFloat  # seconds
    time_to_reject_p99: JsonFloat  # seconds; null: nothing refused
    slos: list[StepSlo]
    validity_reasons: list[str]


class Recommendation(_Record):
    """The setting with the highest admitted throughput whose SLOs hold."""

    setting: int  # its index in settings
    label: str
    values: dict[str, str]
    why: str  # one sentence from the measured figures, and what the neighbours lost


class AdviceReport(_Document):
    """advice.json: every setting tried, and the one recommended (or null: none passed)."""

    schema_id: Literal["zqbench.advice/1"] = Field(default=ADVICE_SCHEMA, alias="schema")
    scenario: str
    command: str  # --server-cmd as given, secrets redacted
    params: dict[str, list[str]]  # --server-param: name -> values, in the order given
    target: str  # --target, or http://127.0.0.1:{port} (a free port per setting)
    started_at: str  # ISO 8601, UTC, whole seconds
    slos: list[str]  # the scenario's, then the command's
    ready_timeout_s: float
    settings: list[SettingResult]  # in the order they ran
    recommendation: Recommendation | None
    outcome: str  # one line: the recommendation, or why there is none


if __name__ == "__main__":
    if sys.argv[1:]:
        sys.exit("usage: python -m zqbench.outputs.advice_model > docs/advice.schema.json")
    print(json_schema(AdviceReport), end="")
