"""`python -m tests.impair.driver SCENARIO TARGET OUT [DURATION_SCALE]`: one zqbench run.

Runs `run_scenario` with the hooks `zqbench.run_hooks.hooks_for_run` builds, exactly as
`zqbench run` does, inside whatever network namespace it is started in. Exits with the
run's exit code (130 after SIGTERM, which the run turns into a graceful stop).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path
from urllib.parse import urlsplit

import zqbench.run
from zqbench.errors import ZqbenchError
from zqbench.run import RunOptions, prepare_scenario, run_scenario
from zqbench.run_hooks import hooks_for_run


def main(argv: list[str]) -> int:
    scenario, target, out = argv[0], argv[1], Path(argv[2])
    scale = float(argv[3]) if len(argv) > 3 else 1.0
    options = RunOptions(
        scenario=scenario, target=target, model="zq-reference", out=out, duration_scale=scale
    )
    # Until run_scenario builds the hooks itself, pass them in (never both: rules twice).
    if "hooks_for_run" not in inspect.getsource(zqbench.run):
        parts = urlsplit(target)
        hooks = hooks_for_run(
            prepare_scenario(options),
            telemetry=[],
            target_host=parts.hostname or "",
            target_port=parts.port or 80,
        )
        options = dataclasses.replace(options, hooks=tuple(hooks))
    try:
        result = run_scenario(options)
    except ZqbenchError as exc:
        print(f"zqbench: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    print(result.out_dir)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
