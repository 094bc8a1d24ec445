"""`python -m tests.impair.driver SCENARIO TARGET OUT [DURATION_SCALE]`: one zqbench run.

Runs `run_scenario` (which builds the scenario's impairment hook itself), exactly as
`zqbench run` does, inside whatever network namespace it is started in. Exits with the
run's exit code (130 after SIGTERM, which the run turns into a graceful stop).
"""

from __future__ import annotations

import sys
from pathlib import Path

from zqbench.errors import ZqbenchError
from zqbench.pipeline.run import RunOptions, run_scenario

MAX_SCHEDULE_LAG_S = 0.2


def main(argv: list[str]) -> int:
    scenario, target, out = argv[0], argv[1], Path(argv[2])
    scale = float(argv[3]) if len(argv) > 3 else 1.0
    try:
        options = RunOptions.of(
            scenario=scenario,
            target=target,
            model="zq-reference",
            out=out,
            duration_scale=scale,
            # These runs measure the loss, not the generator: on a busy shared machine its
            # lateness past the default 10 ms would make the run invalid (exit 4).
            max_schedule_lag_s=MAX_SCHEDULE_LAG_S,
        )
        result = run_scenario(options)
    except ZqbenchError as exc:
        print(f"zqbench: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    print(result.out_dir)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
