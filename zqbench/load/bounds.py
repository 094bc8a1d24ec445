"""The memory budget: the bounds one value of a scenario, a trace or a dataset is checked
against before anything is allocated for it (exit 2 naming the value and the bound).

Each bound is past what a real workload asks of one run (a longer load is split into runs),
and the run's peak RSS with the largest value accepted stays under 2 GiB (measured figures:
docs/scenarios.md, "Bounds").
The users at once (`executor.MAX_USERS`) and the requests an arrival-rate load plans
(`arrival_rate.MAX_PLANNED_REQUESTS`) are checked where they are counted.
"""

from __future__ import annotations

# The largest context any model advertises (Llama 4 Scout's, 10M tokens): a prompt longer
# than this fits no target, and refusing it costs no traffic; found on the target it cost
# the set-up probes and a run of errors (exit 4), and a prompt of 1e8 tokens is 100 MB of
# text built for every request.
MAX_PROMPT_TOKENS = 10_000_000
# An answer's length a row may ask for: past any model's longest answer (the largest give
# about 128k tokens today); 9.2e18 once ended a run with an internal error.
MAX_OUTPUT_TOKENS = 1_000_000
# A dataset's row or a trace's line longer than this (4 million tokens of text, past any
# context) is a broken file, not a row; refused before more of it is read: a 1 GiB line
# once took 10 GiB.
MAX_ROW_BYTES = 16 << 20
# Rows of a dataset file: the index keeps 40 bytes a row, the source and each worker's copy
# 40 more, with the filters' passes beside them.
MAX_DATASET_ROWS = 5_000_000
# Rows of a trace file, each one's time kept by the index pass (431 MiB at the bound); a
# run replays at most arrival_rate.MAX_PLANNED_REQUESTS of them ([load] duration cuts it).
MAX_TRACE_ROWS = 20_000_000
# A trace's hash ids of 2^32 or more are remembered one by one (a set, about 100 bytes an
# id) to count the ideal reuse; traces number theirs from 0 in order of first use.
MAX_LARGE_HASH_IDS = 2_000_000
# A trace's last row after its first, in ms: its times are int64 nanoseconds (9.2e18).
MAX_TRACE_SPAN_MS = 1e12
