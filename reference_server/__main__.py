"""`python -m reference_server`: the same as `zqbench serve`."""

import sys

from reference_server.cli import main

sys.exit(main())
