"""Every file a run, a sweep, a comparison or `conform` writes: renderers of summary.json +
samples.parquet, never new statistics (the commands over saved runs are zqbench.saved).

    paths.py           the output folder and the file names written into it
    registry.py        every file written, by document: write_run, write_sweep, write_advice,
                       write_conform, write_comparison
    json_out.py        summary.json: write_summary, load_summary (the one reader), redacted
    view.py            the view model of a summary, shared by report.html and summary.md
    templating.py      the jinja2 environments over templates/
    render.py          summary.md, and report.html with its figures: one self-contained
                       page (inline CSS, base64 PNGs)
    plots.py           the figures as PNG (the only module importing matplotlib, lazily, Agg)
    series.py          time bins: rates, status shares, per-bin percentile bands (numpy)
    junit.py           junit.xml
    sweep.py           sweep.md
    conform.py         conform.json, its junit.xml and terminal table
    compare_render.py  compare.md, compare.html, compare.json
    start_record.py    run-start.json, so a killed run can be recovered

Statistics come from `zqbench.metrics`. Data flows one way: saved run -> metrics ->
renderers. Import the submodules directly; this package imports nothing.
"""
