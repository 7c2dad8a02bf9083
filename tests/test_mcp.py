"""MCP servers' tools for any model: real servers made with the official SDK
(``tests/mcp_servers.py``), over stdio and over streamable HTTP on 127.0.0.1, their tools given
to ``toolwire chat`` against the fake OpenAI-compatible upstream over real HTTP, and to the
real local model. Each call's marker line proves it ran in the server's process."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from toolwire.backends import OpenAIBackend
from toolwire.cli import main
from toolwire.conversation import Conversation
from toolwire.errors import UsageError
from toolwire.events import ToolResult
from toolwire.loop import run_loop
from toolwire.mcp import McpConnectError, McpServer, McpSpec, McpToolError, result_text
from toolwire.mcp_cli import read_config
from toolwire.testing import FakeOpenAIServer, text_deltas, tool_call_deltas
from toolwire.tools import Toolbox

SERVER = Path(__file__).parent / "mcp_servers.py"
ALL_TOOLS = [
    "read_note",
    "add_note",
    "delete_note",
    "set_flag",
    "plain",
    "stats",
    "snapshot",
    "fail",
    "slow",
    "book",
    "crash",
    "crash_idempotent",
]
READ_ONLY_TOOLS = ["read_note", "stats", "snapshot", "fail"]


def stdio_command(marker: Path, *extra: str) -> str:
    return shlex.join([sys.executable, str(SERVER), "stdio", "--marker", str(marker), *extra])


def marks(marker: Path) -> list[dict[str, Any]]:
    if not marker.exists():
        return []
    return [json.loads(line) for line in marker.read_text().splitlines()]


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "calls.jsonl"


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(argv: list[str], port: int) -> Iterator[str]:
    """A server process listening on 127.0.0.1:``port``; its MCP URL while it runs."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, "the MCP HTTP server exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the MCP HTTP server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def http_url(marker: Path) -> Iterator[str]:
    """The test server over streamable HTTP on 127.0.0.1; stopped after the test."""
    port = _free_port()
    argv = [sys.executable, str(SERVER), "http", str(port), "--marker", str(marker)]
    with serving(argv, port) as url:
        yield url


def script(upstream: FakeOpenAIServer, name: str, arguments: dict[str, Any], answer: str) -> None:
    """The upstream calls ``name`` once, then answers with text after the result."""
    upstream.add_stream(
        tool_call_deltas([("c1", name, json.dumps(arguments))]), finish_reason="tool_calls"
    )
    upstream.add_stream(text_deltas(answer))


def run_chat(
    upstream: FakeOpenAIServer,
    *flags: str,
    stdin: str = "",
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(["chat", "--once", "Go.", "--base-url", upstream.base_url, "--model", "m", *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def offered(upstream: FakeOpenAIServer, index: int = 0) -> list[str]:
    return [t["function"]["name"] for t in upstream.requests[index].get("tools") or []]


def tool_message(upstream: FakeOpenAIServer) -> str:
    """The tool result the model read on the second request."""
    (message,) = [m for m in upstream.requests[1]["messages"] if m["role"] == "tool"]
    return str(message["content"])


# -- the async core


def test_a_servers_tools_keep_their_schema_and_annotations_over_pages(marker: Path) -> None:
    async def go() -> None:
        spec = McpSpec.parse(stdio_command(marker, "--page-size", "3"))
        async with McpServer(spec) as server:
            tools = {t.name: t for t in server.tools()}
            assert list(tools) == ALL_TOOLS  # four pages of three, all read
            assert [n for n, t in tools.items() if t.read_only] == READ_ONLY_TOOLS
            assert tools["read_note"].parameters["required"] == ["name"]
            assert tools["read_note"].description == "Read a note by its name."
            assert all(t.side_effects != t.read_only for t in tools.values())
            hints = {n: server.hints(n) for n in tools}
            # the spec's defaults: a tool with no annotations may destroy, is not idempotent
            assert hints["plain"] is not None and hints["plain"].destructive
            assert not hints["plain"].idempotent
            assert hints["delete_note"] is not None and hints["delete_note"].destructive
            assert hints["add_note"] is not None and not hints["add_note"].destructive
            assert hints["set_flag"] is not None and hints["set_flag"].idempotent
            assert hints["read_note"] is not None and not hints["read_note"].destructive
        assert spec.name == "mcp_servers"

    asyncio.run(go())


def test_results_become_text_for_the_model(marker: Path) -> None:
    async def go() -> None:
        async with McpServer(McpSpec.parse(stdio_command(marker))) as server:
            assert await server.call("read_note", {"name": "todo"}) == "buy milk"
            assert json.loads(await server.call("stats", {})) == {"notes": 2, "chars": 15}
            assert await server.call("snapshot", {}) == "[image: image/png, 68 bytes]"
            with pytest.raises(McpToolError, match=r"the disk is full \(no space\)"):
                await server.call("fail", {"reason": "no space"})
            with pytest.raises(McpToolError, match="nope"):  # the server's own error
                await server.call("nope", {})
        pids = {m["pid"] for m in marks(marker)}
        assert len(pids) == 1 and os.getpid() not in pids  # the server's process ran them

    asyncio.run(go())


def test_every_kind_of_block_is_named_in_words() -> None:
    result = CallToolResult(
        content=[
            AudioContent(data="AAAA", mime_type="audio/wav"),
            ResourceLink(name="report", uri="file:///r.pdf", mime_type="application/pdf"),
            EmbeddedResource(
                type="resource", resource=TextResourceContents(uri="file:///a.txt", text="hi")
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(uri="file:///b", mime_type="x/y", blob="AAAAAA=="),
            ),
        ],
        structured_content={"ok": True},
    )
    assert result_text(result).splitlines() == [
        '{"ok": true}',  # no text block carries it, so it is shown
        "[audio: audio/wav, 3 bytes]",
        "[resource link: report file:///r.pdf, application/pdf]",
        "[resource file:///a.txt]",
        "hi",
        "[resource file:///b: x/y, 4 bytes]",
    ]
    with_text = CallToolResult(content=[TextContent(text="3 notes")], structured_content={"n": 3})
    assert result_text(with_text) == "3 notes"  # the text is the result when there is one


def test_the_async_loop_runs_calls_on_the_same_loop_and_asks_first(
    marker: Path, upstream: FakeOpenAIServer
) -> None:
    script(upstream, "delete_note", {"name": "todo"}, "Kept it.")
    asked: list[str] = []

    async def refuse(call: Any) -> bool:
        asked.append(call.name)
        return False

    async def go() -> list[Any]:
        async with McpServer(McpSpec.parse(stdio_command(marker))) as server:
            backend = OpenAIBackend("m", base_url=upstream.base_url)
            events = run_loop(backend, Conversation(), Toolbox(server.tools()), confirm=refuse)
            return [e async for e in events]

    events = asyncio.run(go())
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert asked == ["delete_note"]
    assert result.status == "denied" and "not confirmed" in result.content
    assert marks(marker) == []  # refused: nothing ran


def test_a_server_that_fails_to_start_says_why() -> None:
    async def go(command: str) -> str:
        with pytest.raises(McpConnectError) as info:
            await McpServer(McpSpec.parse(command), connect_timeout=10).connect()
        return str(info.value)

    assert "no such command: no-such-mcp-server-x" in asyncio.run(go("no-such-mcp-server-x"))
    message = asyncio.run(go(shlex.join([sys.executable, "-c", "pass"])))
    assert message.startswith("MCP server ") and "\n" not in message


def test_without_the_sdk_the_message_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import asyncio, toolwire.mcp, toolwire.mcp_cli, toolwire.cli\n"
        "from toolwire.mcp import McpServer, McpSpec\n"
        "try:\n"
        "    asyncio.run(McpServer(McpSpec(url='http://127.0.0.1:9/mcp')).connect())\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent / "src")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.stdout.strip() == "MCP servers need the official SDK: pip install 'toolwire[mcp]'"


# -- toolwire chat --mcp


def test_chat_over_stdio_runs_the_call_in_the_server(
    marker: Path,
    upstream: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script(upstream, "read_note", {"name": "todo"}, "Buy milk.")
    code, out, _ = run_chat(
        upstream, "--mcp", stdio_command(marker), monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0
    assert out == '→ read_note({"name": "todo"})\n← buy milk\nBuy milk.\n'
    assert offered(upstream) == ALL_TOOLS  # the demo tools are replaced
    assert tool_message(upstream) == "buy milk"
    (mark,) = marks(marker)
    assert mark["tool"] == "read_note" and mark["args"] == {"name": "todo"}
    assert mark["pid"] != os.getpid()


def test_chat_over_http_runs_the_call_in_the_server(
    marker: Path,
    http_url: str,
    upstream: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script(upstream, "add_note", {"name": "x", "text": "hello"}, "Added.")
    code, out, err = run_chat(upstream, "--mcp", http_url, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err
    assert "← added x\nAdded.\n" in out and "?" not in out  # not destructive: not asked
    assert [(m["tool"], m["args"]) for m in marks(marker)] == [
        ("add_note", {"name": "x", "text": "hello"})
    ]
    assert marks(marker)[0]["pid"] != os.getpid()


def test_read_only_mode_offers_only_read_only_tools(
    marker: Path,
    upstream: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script(upstream, "add_note", {"name": "x", "text": "y"}, "Could not.")
    code, out, _ = run_chat(
        upstream,
        "--mcp",
        stdio_command(marker),
        "--read-only",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0
    assert offered(upstream) == READ_ONLY_TOOLS
    # a write asked for anyway is not one of the request's tools: never passed on, never run
    assert "add_note, which the request did not declare" in out and marks(marker) == []


@pytest.mark.parametrize(
    ("answer", "flags", "runs"),
    [("y\n", (), True), ("n\n", (), False), ("", (), False), ("", ("--yes",), True)],
    ids=["yes", "no", "end-of-input", "--yes"],
)
def test_a_destructive_tool_is_asked_about_first(
    answer: str,
    flags: tuple[str, ...],
    runs: bool,
    marker: Path,
    upstream: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script(upstream, "delete_note", {"name": "todo"}, "Done.")
    code, out, _ = run_chat(
        upstream,
        "--mcp",
        stdio_command(marker),
        *flags,
        stdin=answer,
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0 and out.endswith("Done.\n")
    question = '? delete_note({"name": "todo"}) may change or delete things. Run it? [y/N] '
    assert (question in out) == (not flags)
    assert [m["tool"] for m in marks(marker)] == (["delete_note"] if runs else [])
    if runs:
        assert tool_message(upstream) == "deleted todo"
    else:
        assert tool_message(upstream) == "delete_note was refused: it was not confirmed"
        assert "[denied]" in out


def test_an_error_result_reaches_the_model_as_a_failed_call(
    marker: Path,
    upstream: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script(upstream, "fail", {"reason": "quota"}, "The disk is full.")
    code, out, _ = run_chat(
        upstream, "--mcp", stdio_command(marker), monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0 and "[error]" in out
    read = tool_message(upstream)
    assert read.startswith("fail failed: McpToolError: ") and "the disk is full (quota)" in read
    assert [m["tool"] for m in marks(marker)] == ["fail"]


def test_a_server_that_will_not_start_is_one_line_and_the_chat_goes_on(
    marker: Path,
    upstream: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script(upstream, "read_note", {"name": "plan"}, "Ship it.")
    code, out, err = run_chat(
        upstream,
        "--mcp",
        "no-such-mcp-server-x --flag",
        "--mcp",
        stdio_command(marker),
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0 and out.endswith("← ship it\nShip it.\n")
    lines = [ln for ln in err.splitlines() if ln.startswith("toolwire:")]
    assert lines == [
        "toolwire: MCP server no-such-mcp-server-x could not be started: "
        "no such command: no-such-mcp-server-x; going on without it"
    ]
    assert "Traceback" not in err


def test_a_call_past_its_timeout_is_an_unknown_outcome_and_the_server_serves_on(
    marker: Path,
    tmp_path: Path,
    upstream: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The server's ``timeout`` bounds each call, as a local tool's does: a write that has
    not answered in time may have taken effect (never retried), and the next call works."""
    config = tmp_path / "mcp.toml"
    config.write_text(f"[[mcp]]\ncommand = {json.dumps(stdio_command(marker))}\ntimeout = 1\n")
    upstream.add_stream(
        tool_call_deltas([("c1", "slow", '{"seconds": 30}')]), finish_reason="tool_calls"
    )
    script(upstream, "read_note", {"name": "todo"}, "Still here.")
    started = time.monotonic()
    code, out, err = run_chat(
        upstream, "--mcp-config", str(config), monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0, err
    assert time.monotonic() - started < 20  # not the 30 s the call asked for
    (slow,) = [m for m in upstream.requests[1]["messages"] if m["role"] == "tool"]
    assert slow["content"] == (
        "slow did not finish within 1 s. It may or may not have taken effect: "
        "check before calling it again."
    )
    assert "[unknown-outcome]" in out and out.endswith("← buy milk\nStill here.\n")
    assert [m["tool"] for m in marks(marker)] == ["slow", "read_note"]  # slow ran once
    assert "toolwire:" not in err  # a slow call is no lost server


def test_an_operation_id_parameter_is_the_loops_never_the_models(
    marker: Path,
    upstream: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script(upstream, "book", {"room": "a", "operation_id": "mine"}, "Booked.")
    code, out, err = run_chat(
        upstream, "--mcp", stdio_command(marker), monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0, err
    (book,) = [t for t in upstream.requests[0]["tools"] if t["function"]["name"] == "book"]
    assert book["function"]["parameters"]["properties"].keys() == {"room"}
    assert book["function"]["parameters"]["required"] == ["room"]
    (mark,) = marks(marker)
    assert mark["args"]["room"] == "a"
    assert re.fullmatch(r"op-[0-9a-f]{24}", mark["args"]["operation_id"])  # not "mine"
    assert "← booked a" in out


@pytest.mark.parametrize(
    ("tool", "status"), [("crash", "unknown-outcome"), ("crash_idempotent", "unavailable")]
)
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_server_that_dies_mid_call_is_one_line_and_the_chat_goes_on(
    tool: str,
    status: str,
    transport: str,
    marker: Path,
    upstream: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    target = stdio_command(marker) if transport == "stdio" else request.getfixturevalue("http_url")
    script(upstream, tool, {}, "It broke.")
    upstream.add_stream(
        tool_call_deltas([("c2", "read_note", '{"name": "todo"}')]), finish_reason="tool_calls"
    )
    upstream.add_stream(text_deltas("Gone."))
    # two prompts: the first call ends the server, the second turn's call meets it gone
    monkeypatch.setattr(sys, "stdin", io.StringIO("break it\nread it\n"))
    code = main(["chat", "--base-url", upstream.base_url, "--model", "m", "--mcp", target])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"[{status}]" in out and out.endswith("Gone.\n> ")
    lines = [ln for ln in err.splitlines() if ln.startswith("toolwire:")]
    assert len(lines) == 1 and "stopped" in lines[0] and "unavailable now" in lines[0]
    assert "Traceback" not in err
    assert [m["tool"] for m in marks(marker)] == [tool]  # ran once, never repeated
    results = [m for m in upstream.requests[-1]["messages"] if m["role"] == "tool"]
    assert "is not connected" in results[-1]["content"]  # the later call did nothing
    first = results[0]["content"]
    if status == "unavailable":  # idempotent: tried again by the loop, which found it gone
        assert first.startswith(f"{tool} is unavailable for now (") and "not connected" in first
    else:  # never tried again: the model reads the lost answer and is told to check first
        assert "was lost during the call" in first and "check before calling it again" in first


def test_the_same_tool_name_twice_is_left_out_or_kept_with_a_prefix(
    marker: Path,
    tmp_path: Path,
    upstream: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    upstream.add_stream(text_deltas("Hi."))
    code, _, err = run_chat(
        upstream,
        "--mcp",
        stdio_command(marker),
        "--mcp",
        stdio_command(marker),
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0 and offered(upstream) == ALL_TOOLS
    left_out = [ln for ln in err.splitlines() if "left out" in ln]
    assert len(left_out) == len(ALL_TOOLS) and "prefix" in left_out[0]

    config = tmp_path / "mcp.toml"
    config.write_text(
        f"[[mcp]]\ncommand = {json.dumps(stdio_command(marker))}\n\n"
        f"[[mcp]]\nname = 'second'\nprefix = 'b'\n"
        f"command = {json.dumps(shlex.split(stdio_command(marker)))}\n"
    )
    assert [s.name for s in read_config(str(config))] == ["mcp_servers", "second"]
    script(upstream, "b_read_note", {"name": "todo"}, "Milk.")
    code, out, err = run_chat(
        upstream, "--mcp-config", str(config), monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0 and "left out" not in err
    assert offered(upstream, 1) == ALL_TOOLS + [f"b_{n}" for n in ALL_TOOLS]
    assert "← buy milk" in out  # the prefixed name calls the server's own name
    assert [m["tool"] for m in marks(marker)] == ["read_note"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[mcp]]\nurl = 'ftp://x'\n", "must start with http://"),
        ("[[mcp]]\ncommand = 'a'\nurl = 'http://x'\n", "command (a string or a list) or url"),
        ("[[mcp]]\ncommand = 'a'\ncolour = 1\n", "unknown keys ['colour']"),
        ("mcp = 1\n", "a list of [[mcp]] tables"),
        ("[[mcp\n", "is not TOML"),
    ],
)
def test_a_bad_config_is_refused_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "mcp.toml"
    config.write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)):
        read_config(str(config))


def test_the_loop_never_repeats_a_call_of_unknown_outcome_and_asks_sync_confirm(
    upstream: FakeOpenAIServer,
) -> None:
    """The same rules for a local tool: a lost answer is not retried, and a plain confirm
    function (run in a thread) refuses a call before it runs."""
    from toolwire.loop import run_loop_sync
    from toolwire.tools import Tool, ToolOutcomeUnknown

    ran: list[str] = []

    def send(to: str) -> str:
        ran.append(to)
        raise ToolOutcomeUnknown("the line went dead")

    box = Toolbox([Tool.from_function(send), Tool.from_function(lambda: "x", name="other")])
    upstream.add_stream(
        tool_call_deltas([("c1", "send", '{"to": "a"}'), ("c2", "other", "{}")]),
        finish_reason="tool_calls",
    )
    upstream.add_stream(text_deltas("Checking."))
    events = list(
        run_loop_sync(
            OpenAIBackend("m", base_url=upstream.base_url),
            Conversation(),
            box,
            confirm=lambda call: call.name != "other",
        )
    )
    results = {e.name: e for e in events if isinstance(e, ToolResult)}
    assert ran == ["a"]  # once: an unknown outcome is never tried again
    assert results["send"].status == "unknown-outcome"
    assert "the line went dead" in results["send"].content
    assert "check before calling it again" in results["send"].content
    assert results["other"].status == "denied"
