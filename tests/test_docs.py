"""The docs describe the code that is there: README's layout matches `ls`, the architecture
page names every stage module, and nothing points outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOT_LISTED = {"__init__.py", "__main__.py", "py.typed", "__pycache__"}
OUTSIDE = ("..", "/shared")  # joined at run time, so that this file does not name it


def _layout_block() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Layout", 1)[1]
    return section.split("```", 2)[1]


def _named_in(text: str) -> set[str]:
    """Module and folder names as the layout writes them: `run.py`, `pipeline/`."""
    return set(re.findall(r"(?<!\S)([a-z_][a-z0-9_]*(?:\.py|/))(?!\S)", text))


def test_readme_layout_lists_every_module_of_the_package() -> None:
    block = _layout_block()
    entries = {
        p.name + ("/" if p.is_dir() else "")
        for p in (REPO / "zqbench").iterdir()
        if p.name not in NOT_LISTED
    }
    named = _named_in(block)
    listed = {e for e in entries if e in named}
    assert sorted(entries - listed) == [], "README's layout misses these; add them"


def test_readme_layout_names_only_what_exists() -> None:
    named = _named_in(_layout_block())
    package = {p.name + ("/" if p.is_dir() else "") for p in (REPO / "zqbench").iterdir()}
    top = {p.name + "/" for p in REPO.iterdir() if p.is_dir()}
    missing = sorted(n for n in named if n not in package and n not in top)
    assert missing == [], "README's layout names modules that do not exist"


def test_architecture_page_names_every_pipeline_stage() -> None:
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    stages = sorted(
        p.name for p in (REPO / "zqbench" / "pipeline").glob("*.py") if p.name != "__init__.py"
    )
    assert stages, "zqbench/pipeline/ has no stage modules"
    absent = [name for name in stages if f"pipeline/{name}" not in page]
    assert absent == []


def test_nothing_points_outside_the_repository() -> None:
    """A clone has no sibling `shared` folder: the contract lives in docs/design.md."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    offenders = []
    for name in filter(None, tracked):
        path = REPO / name.decode()
        if not path.is_file() or path.suffix in {".parquet", ".png"}:
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        if "".join(OUTSIDE) in text:
            offenders.append(name.decode())
    assert offenders == [], "point these at docs/design.md instead"


def test_how_to_extend_names_only_files_that_exist() -> None:
    """docs/architecture.md's "How to extend" lists the files a new executor, source,
    dialect, output, conform check or engine touches: each path it names is real (NAME
    stands for the new one's own module)."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## How to extend", 1)[1].split("\n## ", 1)[0]
    paths = set(re.findall(r"`((?:zqbench|tests|docs)/[^`\s]*)`", section))
    assert len(paths) >= 20, sorted(paths)  # the table is there, not an empty section
    extension_points = {"executor", "request source", "dialect", "output file", "conform check"}
    assert all(f"| a{'n' if p[0] in 'aeo' else ''} {p}" in section for p in extension_points)
    missing = sorted(p for p in paths if "NAME" not in p and not (REPO / p).exists())
    assert missing == []
