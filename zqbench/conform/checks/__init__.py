"""The checks, one module per group; `zqbench.conform.catalogue` lists them in order."""
