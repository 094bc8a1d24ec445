"""`[stop]` rules: end a stage, or the run, when the target saturates.

    config.py    the rule types (RULE_TYPES), each its [stop.NAME] keys, parser and `judge`
    rules.py     the judgements over a Window: the outcome kernel's classes (pure)
    ended.py     EndedAt: the stops, shared with the workers, read before each send

The watcher that applies them while the load runs is the pipeline's (pipeline/stopping.py:
StopWatch, progress in, a Window to each rule, stages ended), since it reads the engines'
progress. A new rule: its class in config.py and a line in RULE_TYPES, a StopConfig field,
its name in summary.StopEvent.rule.
"""
