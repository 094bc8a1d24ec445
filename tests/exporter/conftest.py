"""Fixtures shared with tests/core: the session's sim reference server."""

from tests.core.conftest import ref_server

__all__ = ["ref_server"]
