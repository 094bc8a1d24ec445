from __future__ import annotations

from tests.servers.fixtures import (  # noqa: F401  (fixtures, used by name)
    blackhole_url,
    programmed_server,
    refused_url,
    tls_server,
)
