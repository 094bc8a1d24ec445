"""Stage 5, write: the summary -> every output beside samples.parquet.

summary.json   summary.md   junit.xml   report.html (+ plots/), unless html is off
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from zqbench.outputs.json_out import write_summary
from zqbench.outputs.junit import write_junit
from zqbench.outputs.markdown import write_summary_md
from zqbench.outputs.render import render_html
from zqbench.summary import Summary


def write_outputs(
    out_dir: Path,
    summary: Summary,
    samples: pd.DataFrame,
    *,
    inconclusive_fails: bool,
    html: bool,
) -> None:
    """Every output of a run; an inconclusive SLO is a JUnit failure or a skip."""
    write_summary(summary, out_dir / "summary.json")
    write_summary_md(summary, out_dir / "summary.md")
    write_junit(
        summary,
        out_dir / "junit.xml",
        inconclusive_as="failure" if inconclusive_fails else "skipped",
    )
    if html:
        render_html(out_dir, summary, samples)
