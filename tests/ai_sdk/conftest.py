"""The client tests use the CLI tests' live server (the app under uvicorn, in a thread)."""

from tests.cli.conftest import keyed_server, live_server

__all__ = ["keyed_server", "live_server"]
