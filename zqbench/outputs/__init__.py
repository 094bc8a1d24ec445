"""Every output of a run, and the commands over saved runs: renderers of summary.json +
samples.parquet, never new statistics.

    paths.py           the output folder and the file names written into it
    json_out.py        summary.json: write_summary, load_summary (the one reader), redacted
    junit.py           junit.xml
    view.py            the view model of a summary, shared by report.html and summary.md
    templating.py      the jinja2 environments over templates/
    markdown.py        summary.md
    html.py            report.html: one self-contained page (inline CSS, base64 PNGs)
    saved.py           load_run(dir) -> SavedRun; run_info(summary) -> RunInfo
    series.py          time bins: rates, status shares, per-bin percentile bands (numpy)
    plots.py           the figures as PNG (the only module importing matplotlib, lazily, Agg)
    registry.py        every file written, by document: write_run, rerender_run, write_sweep,
                       write_conform, write_comparison
    render.py          render_html: report.html and its figures
    gate.py            gate_run(dir, slos): re-evaluate SLOs on a saved run
    compare.py         compare_runs(dirs): differences with CIs and a regression verdict
    compare_render.py  compare.md, compare.html, compare.json

Statistics come from `zqbench.metrics` (summarize, quantiles, SLO evaluation). Data flows
one way: saved run -> metrics -> renderers. Import the submodules directly; this package
imports nothing.
"""
