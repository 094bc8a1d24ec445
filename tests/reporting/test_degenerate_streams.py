"""#25 item 8: a target that is valid but odd must not crash the report after the load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.reporting.synth import write_synthetic_run
from zqbench.saved.report import report_run


@pytest.mark.slow  # renders a whole report
def test_streams_that_arrive_in_one_read_render_a_report(tmp_path: Path) -> None:
    """Behind a buffering proxy every token arrives in one read: every inter-token gap is
    0. The ITL histogram crashed the report ('zero-size array'); now the panel is empty."""
    run = tmp_path / "run"
    write_synthetic_run(run, n=200)
    table = pq.read_table(run / "samples.parquet")
    for name in ("itl_mean_ns", "itl_p99_ns", "itl_max_ns"):
        zeros = pa.array(np.zeros(table.num_rows, np.int64))
        table = table.set_column(table.schema.get_field_index(name), name, zeros)
    pq.write_table(table, run / "samples.parquet")
    written = report_run(run)
    assert run / "report.html" in written
    assert (run / "plots" / "histograms.png").read_bytes().startswith(b"\x89PNG")
