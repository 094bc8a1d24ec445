"""The load engine: it runs each worker's `Work` (zqbench.load) and turns every slot into a
request (zqbench.sources) and every request into a `Sample` on disk.

`native` is the asyncio engine (one process, or several through `workers`); a
`--distributed` run (zqbench.distributed) runs the same engine in `zqbench worker`s on
other machines, behind the same `WorkerSpec` -> samples-on-disk contract.
"""
