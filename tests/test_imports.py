"""Importing the CLI stays cheap, and the import contracts in pyproject.toml hold.

The contracts (`[tool.importlinter]`, run by import-linter) fix the layers of zqbench, forbid
cycles between sibling modules, keep the transport free of dialects, metrics and outputs,
keep private modules private, and keep zqbench and the reference server apart. The second
half of this file breaks a copy of the tree on purpose, to prove each contract bites.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("zqbench", "reference_server")


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    return set(out.stdout.split())


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter on the tree at `root` (its pyproject.toml, its packages: the current
    directory comes first on a `-c` child's sys.path). No cache: nothing written there."""
    code = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    return subprocess.run(
        [sys.executable, "-c", code, "--no-cache"],
        capture_output=True,
        text=True,
        cwd=root,
    )


def test_cli_import_loads_no_heavy_module() -> None:
    loaded = _modules_after("import zqbench.cli")
    for heavy in ("torch", "matplotlib", "pandas", "aiohttp", "httpx", "reference_server"):
        assert heavy not in loaded, f"`import zqbench.cli` imported {heavy}"


def test_import_contracts_are_kept() -> None:
    result = _lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


# (file to append an import to, the import, the contract that must break)
VIOLATIONS = {
    "upward import": ("zqbench/samples/sample.py", "import zqbench.pipeline.run", "zqbench layers"),
    "cli imported": ("zqbench/pipeline/run.py", "import zqbench.cli.reports", "zqbench layers"),
    "cycle between siblings": (
        "zqbench/load/executor.py",
        "import zqbench.scenario",
        "no import cycle",
    ),
    "transport on dialects": (
        "zqbench/transport/base.py",
        "import zqbench.dialects.base",
        "the transport knows bytes",
    ),
    "private module": (
        "zqbench/engines/native.py",
        "import zqbench.transport._common",
        "a private (_-prefixed) module",
    ),
    "zqbench on the server": (
        "zqbench/target/embedded.py",
        "import reference_server.config",
        "zqbench and the reference server never import each other",
    ),
    "the server on zqbench": (
        "reference_server/server.py",
        "import zqbench.errors",
        "zqbench and the reference server never import each other",
    ),
}


@pytest.mark.parametrize("case", sorted(VIOLATIONS))
def test_contracts_catch_a_violation(case: str, tmp_path: Path) -> None:
    """The same contracts on a copy of the tree with one bad import added: that contract breaks."""
    path, statement, contract = VIOLATIONS[case]
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    with (tmp_path / path).open("a") as f:
        f.write(f"\n{statement}\n")

    result = _lint_imports(tmp_path)

    assert result.returncode == 1, result.stdout + result.stderr
    broken = [line for line in result.stdout.splitlines() if " BROKEN" in line]
    assert any(line.startswith(contract) for line in broken), result.stdout
