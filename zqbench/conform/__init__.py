"""`zqbench conform`: a numbered conformance suite for zero-queue endpoints.

catalogue.py   the ordered checks (ids, statements)        checks/  one module per group
context.py     what checks share (requests, measurements)  client.py  httpx, one Exchange each
runner.py      run_conformance(options) -> ConformReport   report.py  JSON, JUnit, table
"""

from zqbench.conform.model import CheckOutcome, CheckResult, ConformOptions, ConformReport
from zqbench.conform.runner import run_conformance

__all__ = ["CheckOutcome", "CheckResult", "ConformOptions", "ConformReport", "run_conformance"]
