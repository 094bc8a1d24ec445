"""The run's hooks together: started at t = 0 in order, stopped newest first, always, and
their results merged into one `HookResult` for the summary."""

from __future__ import annotations

import dataclasses

from zqbench.hooks.contract import HookContext, HookResult, RunHook
from zqbench.summary import ServerQueue, Unavailable


class RunningHooks:
    """`start(t0)` at the schedule's t = 0; `stop()` on every way out, even after a failed
    start (a half-started hook is still stopped)."""

    def __init__(self, hooks: list[RunHook], context: HookContext) -> None:
        self.hooks = hooks
        self.context = context
        self.started: list[RunHook] = []

    def start(self, start_ns: int) -> None:
        ctx = dataclasses.replace(self.context, start_monotonic_ns=start_ns)
        for hook in self.hooks:
            self.started.append(hook)  # before start(): a half-started hook is still stopped
            hook.start(ctx)

    def stop(self) -> HookResult:
        """Stop every started hook, newest first, even when one of them fails to stop."""
        merged = HookResult()
        errors: list[str] = []
        for hook in reversed(self.started):
            try:
                result = hook.stop()
            except Exception as exc:  # keep stopping the others; report, never hide
                errors.append(f"{hook.name}: {type(exc).__name__}: {exc}")
                continue
            merged.telemetry.update(result.telemetry)
            merged.server_queue = _preferred(merged.server_queue, result.server_queue)
            if result.environment:
                merged.environment[hook.name] = result.environment
            merged.notes.extend(result.notes)
        merged.notes.extend(f"hook failed to stop: {e}" for e in errors)
        if merged.notes:
            merged.environment["notes"] = merged.notes
        return merged


def _preferred(
    kept: ServerQueue | Unavailable | None, new: ServerQueue | Unavailable | None
) -> ServerQueue | Unavailable | None:
    """The server's queue from several sources: figures over a reason, and among figures
    the earliest hook's (the hooks stop newest first), so an explicit --telemetry URL
    wins over the one found on the target."""
    if new is None or (isinstance(kept, ServerQueue) and not isinstance(new, ServerQueue)):
        return kept
    return new
