"""A stage too narrow for its name is numbered on the plot, and the number is keyed to the
name under the axes: the reader never sees a bare "1"."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from zqbench.outputs.plots import _stage_key, _stage_lines
from zqbench.summary import Stage


def test_a_narrow_stage_is_numbered_and_keyed() -> None:
    stages = [
        Stage(index=0, name="baseline", start=0.0, end=6.0),
        Stage(index=1, name="pulse", start=6.0, end=6.5),
        Stage(index=2, name="recovery", start=6.5, end=13.0),
    ]
    fig, (top, bottom) = plt.subplots(2, 1)
    try:
        numbered = _stage_lines(top, stages, 13.0, label=True)
        assert numbered == ["1 = pulse"]
        assert [t.get_text() for t in top.texts] == ["baseline", "1", "recovery"]
        assert _stage_lines(bottom, stages, 13.0, label=False) == []
        _stage_key(bottom, numbered)
        assert [t.get_text() for t in bottom.texts] == ["stages: 1 = pulse"]
    finally:
        plt.close(fig)


def test_wide_stages_need_no_key() -> None:
    stages = [Stage(index=0, name="steady", start=0.0, end=10.0)]
    fig, ax = plt.subplots()
    try:
        assert _stage_lines(ax, stages, 10.0, label=True) == []
        _stage_key(ax, [])
        assert [t.get_text() for t in ax.texts] == ["steady"]
    finally:
        plt.close(fig)
