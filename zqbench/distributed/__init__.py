"""Load from many machines on Locust's master/worker runners (docs/distributed.md).

`master.py` runs inside `zqbench run --distributed` (stage 3), `worker.py` is
`zqbench worker`; `protocol.py` names the messages and carries what crosses the wire,
`clock.py` the offset estimate, `ledger.py` what the master knows of each worker.
"""
