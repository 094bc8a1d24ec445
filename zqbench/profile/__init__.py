"""`zqbench profile nsys|ncu|torch`: a `zqbench run` with the server under a profiler.

tools     the profiler's command line (nsys / ncu), or exit 2 when it is missing
window    the capture window (a stage or START:END) and the hook that opens and closes
          it through the server's /start_profile and /stop_profile
server    a user's server command (after `--`), started under the profiler
torch_trace / nsys_stats   what a capture shows: top ops, request ranges
command   the flow: start, run_scenario with the hook, collect, report
"""
