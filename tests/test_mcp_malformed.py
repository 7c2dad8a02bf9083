"""A stdio MCP server that sends what is not the protocol: not JSON, JSON that is not
JSON-RPC, an answer to an id never asked, a line with no end, an exit mid-call. Each is a
short toolwire error naming the server and what it did wrong, never a traceback; the other
servers' tools go on working, and a line is read only up to its bound.

The servers are real processes over stdio (``tests/fixtures/mcp/garbage_server.py``, which
answers ``initialize`` and ``tools/list`` and spoils the request it is told to), beside the
SDK-made test server (``tests/mcp_servers.py``); the chat runs as a real ``toolwire chat``
subprocess against the fake OpenAI-compatible upstream over real HTTP.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from toolwire.errors import ToolwireError
from toolwire.mcp import McpConnectError, McpServer, McpSpec
from toolwire.mcp_stdio import MAX_LINE_BYTES
from toolwire.testing import FakeOpenAIServer, text_deltas, tool_call_deltas
from toolwire.tools import ToolUnavailable

HERE = Path(__file__).parent
GARBAGE = HERE / "fixtures" / "mcp" / "garbage_server.py"
NOTES = HERE / "mcp_servers.py"
SRC = HERE.parent / "src"

#: What each kind of garbage is called in the error.
SAID = {
    "not-json": "sent a line that is not JSON",
    "not-jsonrpc": "sent JSON that is not a JSON-RPC message",
    "huge": f"sent a line longer than {MAX_LINE_BYTES} bytes",
    "exit": "exited with status 3",
}


def garbage(when: str, what: str) -> tuple[str, ...]:
    return (sys.executable, str(GARBAGE), when, what)


def traced(records: list[logging.LogRecord]) -> list[str]:
    """The log records that carry a traceback (the SDK's way of reporting garbage)."""
    return [r.getMessage() for r in records if r.exc_info]


@pytest.mark.parametrize("what", list(SAID))
def test_garbage_answering_a_call_is_a_toolwire_error_naming_the_server(
    what: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The call fails at once (not at its timeout), as unavailable (``echo`` is read-only:
    nothing happened); the server is lost, told once, with what it did wrong."""
    caplog.set_level(logging.DEBUG)
    lost: list[str] = []

    async def run() -> None:
        spec = McpSpec(command=garbage("call", what), name="junk")
        async with McpServer(spec, connect_timeout=20, on_lost=lost.append) as server:
            assert [t.name for t in server.tools()] == ["echo"]
            with pytest.raises(ToolUnavailable) as info:
                await asyncio.wait_for(
                    server.call("echo", {"text": "hi"}, server.hints("echo")), 15
                )
            assert "MCP server junk" in str(info.value), info.value
            assert isinstance(info.value, ToolwireError)
            assert not server.connected

    asyncio.run(run())
    assert len(lost) == 1 and "MCP server junk" in lost[0] and SAID[what] in lost[0], lost
    assert traced(caplog.records) == []


@pytest.mark.parametrize("when", ["initialize", "list"])
@pytest.mark.parametrize("what", list(SAID))
def test_garbage_in_the_handshake_is_a_connect_error_naming_the_problem(
    when: str, what: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    async def run() -> None:
        server = McpServer(McpSpec(command=garbage(when, what), name="junk"), connect_timeout=20)
        with pytest.raises(McpConnectError) as info:
            await server.connect()
        message = str(info.value)
        assert message.startswith("MCP server junk "), message
        assert SAID[what] in message, message
        assert len(message) < 300

    asyncio.run(run())
    assert traced(caplog.records) == []


def test_an_answer_to_an_id_never_asked_is_dropped_and_the_call_is_answered() -> None:
    async def run() -> str:
        async with McpServer(McpSpec(command=garbage("call", "unknown-id"))) as server:
            return await server.call("echo", {"text": "still here"})

    assert asyncio.run(run()) == "still here"


def chat(upstream: FakeOpenAIServer, *servers: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """``toolwire chat --once`` in its own process, with each server as an ``--mcp``."""
    flags = [a for s in servers for a in ("--mcp", shlex.join(s))]
    argv = [sys.executable, "-m", "toolwire", "chat", "--once", "Go.", "--yes"]
    argv += ["--base-url", upstream.base_url, "--model", "m", *flags]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("what", list(SAID))
def test_the_chat_says_what_the_server_did_in_one_line_and_the_other_server_serves(
    what: str, tmp_path: Path
) -> None:
    marker = tmp_path / "calls.jsonl"
    notes = (sys.executable, str(NOTES), "stdio", "--marker", str(marker))
    with FakeOpenAIServer() as upstream:
        upstream.add_stream(
            tool_call_deltas([("c1", "echo", '{"text": "hi"}')]), finish_reason="tool_calls"
        )
        upstream.add_stream(
            tool_call_deltas([("c2", "read_note", '{"name": "todo"}')]),
            finish_reason="tool_calls",
        )
        upstream.add_stream(text_deltas("Done."))
        done = chat(upstream, garbage("call", what), notes)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("toolwire:")]
    assert len(lines) == 1, done.stderr
    assert "MCP server garbage_server" in lines[0] and SAID[what] in lines[0], lines
    assert "← buy milk" in done.stdout and done.stdout.endswith("Done.\n")
    assert [json.loads(x)["tool"] for x in marker.read_text().splitlines()] == ["read_note"]


@pytest.mark.parametrize("what", ["not-json", "huge"])
def test_the_chat_goes_on_without_a_server_whose_handshake_is_garbage(
    what: str, tmp_path: Path
) -> None:
    marker = tmp_path / "calls.jsonl"
    notes = (sys.executable, str(NOTES), "stdio", "--marker", str(marker))
    with FakeOpenAIServer() as upstream:
        upstream.add_stream(
            tool_call_deltas([("c1", "read_note", '{"name": "todo"}')]),
            finish_reason="tool_calls",
        )
        upstream.add_stream(text_deltas("Done."))
        done = chat(upstream, garbage("initialize", what), notes)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("toolwire:")]
    assert len(lines) == 1 and SAID[what] in lines[0] and "going on without it" in lines[0]
    assert "← buy milk" in done.stdout
