"""`zqbench conform`: a numbered conformance suite for zero-queue endpoints.

options.py     ConformOptions, validated when built       model.py     checks, results, report
catalogue.py   the ordered checks (ids, statements)       checks/      one module per group
context.py     what checks share (requests, measurements) exchange.py  one request's evidence
loadclient.py  concurrent bursts (the load transport)     stats.py     the slope's CI
capacity.py    the endpoint's capacity (/health, /metrics) queueing.py  zeroqueue.5's rule
runner.py      run_conformance(options) -> ConformReport

Sequential requests go through `zqbench.target.control`; the report's files are written by
`zqbench.outputs.conform`.
"""

from zqbench.conform.model import CheckOutcome, CheckResult, ConformReport
from zqbench.conform.options import ConformOptions
from zqbench.conform.runner import run_conformance

__all__ = ["CheckOutcome", "CheckResult", "ConformOptions", "ConformReport", "run_conformance"]
