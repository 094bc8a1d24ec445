"""`zqbench conform`: a numbered conformance suite for zero-queue endpoints.

options.py     ConformOptions, validated when built       model.py     phases, checks, report
phases.py      the plan: every measurement, in order      checks/      one module per group:
observations.py  what the phases saw, as checks read it                its phases, its checks
context.py     the target's facts; the plan's sender      evidence.py  one request's evidence
catalogue.py   the checks (ids, statements), report order stats.py     the slope's CI
loadclient.py  concurrent bursts (the load transport)     queueing.py  zeroqueue.5's rule
capacity.py    the endpoint's capacity (/health, /metrics) retry.py disconnect.py  .12, .13
runner.py      run_conformance(options): measure the phases the selected checks need, then
               judge each check on the observations it declared
hung.py        a target that stopped answering: the plan stops measuring there

Sequential requests go through `zqbench.target.control`; the report's files are written by
`zqbench.outputs.conform`.
"""

from zqbench.conform.model import CheckOutcome, CheckResult, ConformReport
from zqbench.conform.options import ConformOptions
from zqbench.conform.runner import run_conformance

__all__ = ["CheckOutcome", "CheckResult", "ConformOptions", "ConformReport", "run_conformance"]
