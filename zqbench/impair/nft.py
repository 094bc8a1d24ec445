"""Real kernel packet loss with nftables: build, apply and remove `numgen random` drop rules.

This kernel has no netem, so loss is a drop rule that matches a random share of the
packets to and from the target's address and port. Every rule lives in one table,
`inet zqbench`, and carries the comment `zqbench run=<run name>`: a run removes exactly its
own rules, and `zqbench impair clear` finds anything a killed run left behind.

One rule per direction, each hooked where that direction's packets pass exactly once:

    output chain  daddr = target, dport = port    client -> server
    input chain   saddr = target, sport = port    server -> client

For a loopback target both directions cross `lo`; a client -> server packet passes the
output and the input hook, but only the output rule matches it (its source port is the
client's ephemeral port), so every packet is dropped with probability `loss`, once.

All nft calls go through `run_nft`, the one place that runs the program and turns its
failures into one-line errors.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from zqbench.errors import TargetError, UsageError

FAMILY = "inet"
TABLE = "zqbench"
COMMENT_PREFIX = "zqbench run="
# numgen draws from [0, MODULUS); loss is resolved to 1/MODULUS (0.01 %).
MODULUS = 10_000
REMEDY = "run as root (sudo) and install nftables: apt-get install nftables"
_NFT_TIMEOUT_S = 10.0
_UNSAFE = re.compile(r"[^A-Za-z0-9._:+=-]")


@dataclass(frozen=True, slots=True)
class LossRules:
    """Drop a share `loss` of the TCP packets between this host and addresses:port."""

    run: str  # the run's name, written into every rule's comment
    addresses: tuple[str, ...]  # numeric IPv4/IPv6 addresses of the target
    port: int
    loss: float  # 0 < loss <= 1

    @property
    def comment(self) -> str:
        return run_comment(self.run)

    def script(self) -> str:
        """The `nft -f` script that adds the table, its two chains and the rules."""
        threshold = round(self.loss * MODULUS)
        lines = [
            f"add table {FAMILY} {TABLE}",
            f"add chain {FAMILY} {TABLE} output "
            "{ type filter hook output priority filter; policy accept; }",
            f"add chain {FAMILY} {TABLE} input "
            "{ type filter hook input priority filter; policy accept; }",
        ]
        drop = f'numgen random mod {MODULUS} < {threshold} counter drop comment "{self.comment}"'
        for addr in self.addresses:
            ip = "ip6" if ":" in addr else "ip"
            lines.append(
                f"add rule {FAMILY} {TABLE} output {ip} daddr {addr} tcp dport {self.port} {drop}"
            )
            lines.append(
                f"add rule {FAMILY} {TABLE} input {ip} saddr {addr} tcp sport {self.port} {drop}"
            )
        return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class RuleInfo:
    chain: str
    handle: int
    comment: str
    dropped_packets: int


def run_comment(run: str) -> str:
    """The comment that names a run; nft strings cannot hold quotes, so unsafe chars become _."""
    return COMMENT_PREFIX + _UNSAFE.sub("_", run)[:100]


def run_nft(args: Sequence[str], script: str | None = None) -> str:
    """Run `nft ARGS` (feeding `script` on stdin); its stdout, or TargetError with one line."""
    try:
        proc = subprocess.run(
            ["nft", *args],
            input=script,
            capture_output=True,
            text=True,
            timeout=_NFT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise UsageError(f"nft is not installed: {REMEDY}") from None
    except subprocess.TimeoutExpired:
        cmd = " ".join(args)
        raise TargetError(f"nft {cmd} did not finish in {_NFT_TIMEOUT_S:.0f} s") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        detail = lines[0] if lines else f"exit status {proc.returncode}"
        raise TargetError(f"nft {' '.join(args)} failed: {detail}")
    return proc.stdout


def preflight() -> None:
    """Fail before any traffic (exit 2, with the remedy) unless we can edit the ruleset."""
    if os.geteuid() != 0:
        raise UsageError(f"packet-loss impairment needs root and nftables: {REMEDY}")
    if shutil.which("nft") is None:
        raise UsageError(f"packet-loss impairment needs nftables (nft not found): {REMEDY}")
    try:
        run_nft(["list", "tables"])
    except TargetError as exc:  # root without CAP_NET_ADMIN, e.g. in a plain container
        raise UsageError(f"{exc.message}; packet-loss impairment needs {REMEDY}") from None


def resolve(host: str, port: int) -> tuple[str, ...]:
    """The numeric addresses a client would connect to (a name may have several)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise TargetError(f"cannot resolve {host}: {exc.strerror or exc}") from None
    addrs: list[str] = []
    for family, *_, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6):
            addr = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 scope id
            if addr not in addrs:
                addrs.append(addr)
    if not addrs:
        raise TargetError(f"{host} has no IPv4 or IPv6 address")
    return tuple(addrs)


def check(rules: LossRules) -> None:
    """Dry-run the script (`nft --check`): a bad rule fails at start, not mid-run."""
    run_nft(["--check", "-f", "-"], rules.script())


def apply(rules: LossRules) -> None:
    """Add the rules in one transaction (all or none)."""
    run_nft(["-f", "-"], rules.script())


def _table_json() -> list[dict[str, object]] | None:
    """The table's objects from `nft -j -a list table`, or None when there is no table."""
    try:
        out = run_nft(["-j", "-a", "list", "table", FAMILY, TABLE])
    except TargetError as exc:
        if "No such file or directory" in exc.message:
            return None
        raise
    items: list[dict[str, object]] = json.loads(out).get("nftables", [])
    return items


def list_rules(run: str | None = None) -> list[RuleInfo]:
    """zqbench's rules: all of them, or one run's."""
    return _rules_in(_table_json() or [], run)


def _rules_in(items: list[dict[str, object]], run: str | None) -> list[RuleInfo]:
    wanted = None if run is None else run_comment(run)
    found = []
    for item in items:
        rule = item.get("rule")
        if not isinstance(rule, dict):
            continue
        comment = str(rule.get("comment", ""))
        if not comment.startswith(COMMENT_PREFIX) or (wanted and comment != wanted):
            continue
        dropped = 0
        for expr in rule.get("expr", []):  # the `counter` statement: packets that matched
            if isinstance(expr, dict) and isinstance(expr.get("counter"), dict):
                dropped += int(expr["counter"].get("packets", 0))
        found.append(RuleInfo(str(rule["chain"]), int(rule["handle"]), comment, dropped))
    return found


def remove(run: str | None = None) -> list[RuleInfo]:
    """Delete one run's rules (or all zqbench rules); drop the table once it holds none.

    Idempotent: with nothing to remove it does nothing. Returns what it removed, with the
    packets each rule dropped.
    """
    items = _table_json()
    if items is None:
        return []
    mine = _rules_in(items, run)
    total = sum(1 for item in items if isinstance(item.get("rule"), dict))
    if run is None or len(mine) == total:
        # Nothing else in our table: remove the table, chains and all, in one step.
        run_nft(["delete", "table", FAMILY, TABLE])
    elif mine:
        script = "".join(
            f"delete rule {FAMILY} {TABLE} {r.chain} handle {r.handle}\n" for r in mine
        )
        run_nft(["-f", "-"], script)
    return mine
