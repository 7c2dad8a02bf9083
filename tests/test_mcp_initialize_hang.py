"""An MCP server that never answers ``initialize``: the connect ends at its timeout in one
clean error naming the server, and nothing else is said — no "Future exception was never
retrieved" from the handshake given up (asyncio prints that at the future's collection, so
the connect runs in a process of its own and its whole stderr is read)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

SRC = Path(__file__).resolve().parents[1] / "src"

SCRIPT = """
import asyncio, gc, logging, sys
from toolwire.mcp import McpConnectError, McpServer, McpSpec

logging.basicConfig(level=logging.DEBUG)  # asyncio's own reports included
# a server that reads the initialize request and never answers it
HANG = (sys.executable, "-c", "import sys, time\\nsys.stdin.readline()\\ntime.sleep(120)")

async def main() -> None:
    try:
        await McpServer(McpSpec(command=HANG, name="stuck"), connect_timeout=1).connect()
    except McpConnectError as exc:
        print(exc, flush=True)

asyncio.run(main())
gc.collect()
"""


def test_a_server_hanging_in_initialize_is_one_clean_timeout_error() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "MCP server stuck did not answer within 1 s"
    assert "never retrieved" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "McpConnectError" not in done.stderr, done.stderr
