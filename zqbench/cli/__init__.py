"""The `zqbench` command line (`app.py`): one module per command, each thin: flags to the
library's options, then the library's result to the terminal and an exit code."""

from zqbench.cli.app import app, main

__all__ = ["app", "main"]
