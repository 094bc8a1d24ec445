"""Load schedules: when each request is meant to be sent (open loop) or how many virtual
users should run (closed loop), computed up front from a scenario's `LoadConfig`.

    open_loop.arrival_times(load, seed) -> ArrivalSchedule   arrival-rate executors
    closed_loop.vu_plan(load) -> VuPlan                      vus executors
    mix.assign_classes / mix.ClassPicker                     request class per request

Nothing here sends a request or reads a clock: the engine follows these plans.
"""
