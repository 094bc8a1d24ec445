"""Request sources: what each request asks. One module per source, registered here by
name; `base.py` is the protocol every one of them follows.

    synthetic    the scenario's class mix, prompts of a chosen length (prompts.py, mix.py)
    dataset      rows of a file: [request.dataset] or --dataset (dataset_rows.py reads them)
    shared-prefix  groups of prompts sharing a prefix: [request.shared_prefix]
    trace        a trace's rows, prompts built from their blocks: [load] executor = "trace"
    sessions     conversations, each turn with the answers so far: executor = "sessions"
    offer        any of them, each request offering [request]'s tools and thinking budget

An executor (`zqbench.load`) decides when each request goes; a source decides what it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zqbench.load import SessionsLoad, TraceLoad
from zqbench.sources import dataset, sessions, shared_prefix, synthetic, trace
from zqbench.sources.base import Requests, RequestSource
from zqbench.sources.dataset import DatasetSource
from zqbench.sources.offer import OfferSource
from zqbench.sources.sessions import SessionsSource
from zqbench.sources.shared_prefix import SharedPrefixSource
from zqbench.sources.synthetic import SyntheticSource
from zqbench.sources.trace import TraceSource

if TYPE_CHECKING:
    from zqbench.scenario import Scenario
    from zqbench.target.calibrate import Calibration

SOURCES: dict[str, Any] = {
    s.wire_name: s
    for s in (
        SyntheticSource,
        DatasetSource,
        SharedPrefixSource,
        TraceSource,
        SessionsSource,
        OfferSource,
    )
}


def check_source(scenario: Scenario) -> None:
    """Check what the source reads (a dataset or trace file), and what a conversation
    grows to, before any traffic: exit 2 for bad input, before the target is even
    contacted."""
    if scenario.request.dataset is not None:
        dataset.check(scenario.request.dataset)
    if isinstance(scenario.load, TraceLoad):
        scenario.load.index()
    if isinstance(scenario.load, SessionsLoad):
        sessions.check(scenario)


def fit_source(scenario: Scenario, seed: int, calibration: Calibration | None) -> RequestSource:
    """The request source the scenario's [request] table asks for, fitted to the target
    (prompts sized by the calibration): a trace's rows and a conversation's turns by
    their executors, a source with [request] keys of its own by those keys, synthetic
    requests otherwise; each offering the tools and thinking budget of [request]."""
    source = _prompts(scenario, seed, calibration)
    request = scenario.request
    if request.tools is None and request.thinking_budget is None:
        return source
    return OfferSource(source, request.tools, request.thinking_budget)


def _prompts(scenario: Scenario, seed: int, calibration: Calibration | None) -> RequestSource:
    if isinstance(scenario.load, TraceLoad):
        return trace.fit(scenario, seed, calibration)
    if isinstance(scenario.load, SessionsLoad):
        return sessions.fit(scenario, seed, calibration)
    if scenario.request.dataset is not None:
        return dataset.fit(scenario, seed, calibration)
    if scenario.request.shared_prefix is not None:
        return shared_prefix.fit(scenario, seed, calibration)
    return synthetic.fit(scenario, seed, calibration)


def source_to_wire(source: RequestSource) -> dict[str, Any]:
    return {"source": source.wire_name, **source.to_wire()}


def source_from_wire(data: dict[str, Any]) -> RequestSource:
    """The source a master sent; ValueError for a name this zqbench does not know."""
    if data.get("source") not in SOURCES:
        raise ValueError(f"unknown request source {data.get('source')!r}")
    source: RequestSource = SOURCES[data["source"]].from_wire(data)
    return source


__all__ = [
    "SOURCES",
    "RequestSource",
    "Requests",
    "check_source",
    "fit_source",
    "source_from_wire",
    "source_to_wire",
]
