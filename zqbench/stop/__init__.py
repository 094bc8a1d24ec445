"""`[stop]` rules: end a stage, or the run, when the target saturates.

    config.py    the [stop] table -> StopConfig (one-line ScenarioErrors)
    rules.py     each rule's judgement over a window (pure)
    control.py   EndedAt: the stops, shared with the workers, read before each send

The watcher that applies them while the load runs is the pipeline's (pipeline/stopping.py:
StopWatch, progress in, stages ended), since it reads the engines' progress.

A new rule: its dataclass and parser in config.py (and its name in RULES), its judgement in
rules.py, its window in pipeline/stopping.py's StopWatch._judge, its name in
summary.StopEvent.rule.
"""
