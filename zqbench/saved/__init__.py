"""Commands over saved runs: nothing here sends a request.

    run.py       load a run folder: summary.json and samples, checked (load_run, run_info)
    report.py    `zqbench report`: render a saved run again, or recover a killed one
    recover.py   a killed run's summary from its Arrow streams and run-start.json
    gate.py      `zqbench gate`: judge a saved run again on its own or new SLOs
    compare.py   `zqbench compare`: differences between runs with confidence intervals

The files they write are rendered by zqbench.outputs.
"""
