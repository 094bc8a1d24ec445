"""A run as five stages, each in its own module, data passed forward only:

    options.py   RunOptions: every option, a group per concern, checked when built
    plan.py      scenario + options          -> Plan (scenario, works, stages)
    target.py    embedded or remote endpoint -> Target (URL, model, fitted prompts)
    execute.py   plan + target               -> Execution (clocks, hooks, interrupted)
    analyze.py   samples on disk             -> Analysis (summary, samples)
    write.py     summary                     -> summary.json, .md, junit.xml, report.html

`zqbench.pipeline.run.run_scenario` runs them in that order.
"""
