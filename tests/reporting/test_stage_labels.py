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


def test_thousands_of_stages_are_said_not_drawn() -> None:
    """#25 item 11: 5,000 stages drew 35,000 lines and 25,000 labels (minutes of layout, a
    grey smear); past MAX_DRAWN_STAGES the plot says how many there are instead."""
    from zqbench.outputs.plots import MAX_DRAWN_STAGES

    stages = [Stage(index=i, name="s", start=i * 0.002, end=(i + 1) * 0.002) for i in range(5000)]
    fig, (top, bottom) = plt.subplots(2, 1)
    try:
        assert _stage_lines(top, stages, 10.0, label=True) == []
        assert _stage_lines(bottom, stages, 10.0, label=False) == []
        assert [t.get_text() for t in top.texts] == [
            f"5000 stages: boundaries drawn for {MAX_DRAWN_STAGES} at most"
        ]
        assert len(top.lines) == len(bottom.lines) == len(bottom.texts) == 0
    finally:
        plt.close(fig)
