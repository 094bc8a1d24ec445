"""The catalogue: every check, in the order the report lists them.

Ids are stable: a check keeps its id for as long as it exists, and a new check takes the
next free number of its group. The order is the report's alone: every check judges the
observations of the plan's phases (phases.py), measured first in an order of their own,
so the checks give the same verdicts in any order.
"""

from __future__ import annotations

from zqbench.conform.checks import errors, headers, slots, transport, zeroqueue
from zqbench.conform.checks.api import api_checks
from zqbench.conform.model import Check
from zqbench.dialects import DIALECTS

CATALOGUE: tuple[Check, ...] = (
    *(check for api in DIALECTS for check in api_checks(api)),  # api.<name>.*, registry order
    *transport.CHECKS,
    *zeroqueue.CHECKS,
    *slots.CHECKS,  # zeroqueue.11-13
    *errors.CHECKS,
    *headers.CHECKS,
)


def groups() -> list[str]:
    """Every name --only accepts: each group, and each dotted prefix of one (`api`)."""
    out: list[str] = []
    for check in CATALOGUE:
        parts = check.group.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name not in out:
                out.append(name)
    return out


def in_groups(check: Check, only: tuple[str, ...]) -> bool:
    return not only or any(check.group == g or check.group.startswith(g + ".") for g in only)


def format_catalogue() -> str:
    """One line a check, in order: its id and its statement (`zqbench conform --list`)."""
    return "\n".join(f"{c.id:<16} {c.statement}" for c in CATALOGUE)
