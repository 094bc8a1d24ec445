"""Importing the CLI stays cheap, and the two programs never import each other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    return set(out.stdout.split())


def test_cli_import_loads_no_heavy_module() -> None:
    loaded = _modules_after("import zqbench.cli")
    for heavy in ("torch", "matplotlib", "pandas", "aiohttp", "httpx", "reference_server"):
        assert heavy not in loaded, f"`import zqbench.cli` imported {heavy}"


def test_zqbench_never_imports_reference_server() -> None:
    offenders = [
        str(p.relative_to(REPO))
        for p in (REPO / "zqbench").rglob("*.py")
        if "import reference_server" in p.read_text() or "from reference_server" in p.read_text()
    ]
    assert offenders == []


def test_reference_server_never_imports_zqbench() -> None:
    offenders = [
        str(p.relative_to(REPO))
        for p in (REPO / "reference_server").rglob("*.py")
        if "import zqbench" in p.read_text() or "from zqbench" in p.read_text()
    ]
    assert offenders == []
