"""MCP servers' tools on the real local model: ``toolwire chat --once`` with a real SDK server
over stdio and over streamable HTTP (``tests/mcp_servers.py``), and the MCP example of
``docs/mcp.md``; each call's marker line proves it ran in the server's process. The model is
needed: missing, these fail in CI and skip elsewhere (the ``local_gguf`` fixture)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from toolwire.mcp_cli import read_config
from toolwire.testing import FakeOpenAIServer

from . import test_mcp as base
from .test_mcp import (
    SERVER,
    _free_port,
    marks,
    offered,
    run_chat,
    script,
    serving,
    stdio_command,
)

# the fixtures the tests here share with test_mcp.py
marker = base.marker
upstream = base.upstream
http_url = base.http_url


def _toolwire(*argv: str, home: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``toolwire ARGV`` as a user runs it: a subprocess, from this checkout's sources."""
    env = {
        **os.environ,
        "PYTHONPATH": str(SERVER.parent.parent / "src"),
        "TOOLWIRE_HOME": str(home),
        "PYTHONIOENCODING": "utf-8",
    }
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=SERVER.parent.parent,
    )


#: One short question on the real model: read-only (four tools offered), one turn with tools.
LOCAL = ("--read-only", "--max-tool-iters", "1", "--max-tokens", "64", "--temperature", "0")


@pytest.mark.parametrize(
    ("transport", "note", "text"), [("stdio", "todo", "buy milk"), ("http", "plan", "ship it")]
)
def test_toolwire_chat_once_on_the_local_model_runs_the_call_in_the_server(
    transport: str,
    note: str,
    text: str,
    local_gguf: Path,
    marker: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """Qwen2.5-Coder-0.5B in-process, ``toolwire chat --once`` in a subprocess, the server's
    tools over stdio and over streamable HTTP: the call runs in the server's process."""
    target = stdio_command(marker) if transport == "stdio" else request.getfixturevalue("http_url")
    done = _toolwire(
        "chat",
        "--model-path",
        str(local_gguf),
        "--mcp",
        target,
        *LOCAL,
        "--once",
        f"Read the note named {note}.",
        home=tmp_path / "home",
    )
    assert done.returncode == 0, done.stderr
    assert f'→ read_note({{"name": "{note}"}})\n← {text}\n' in done.stdout
    assert "toolwire:" not in done.stderr  # no server left out, no tool left out
    (mark,) = [m for m in marks(marker) if m["tool"] == "read_note"]
    assert mark["args"] == {"name": note} and mark["pid"] != os.getpid()


def _docs_mcp_page() -> str:
    return (SERVER.parent.parent / "docs" / "mcp.md").read_text(encoding="utf-8")


def _docs_argv(line: str, port: int) -> list[str]:
    """A documented line as argv: its port made ``port``, ``python`` this interpreter."""
    argv = shlex.split(line.replace("8001", str(port)), comments=True)
    if argv[-1] == "&":
        argv.pop()
    for i, arg in enumerate(argv):
        if arg.startswith("python "):  # inside --mcp "python …"
            argv[i] = shlex.join([sys.executable, *shlex.split(arg)[1:]])
    return [sys.executable, *argv[1:]] if argv[0] == "python" else argv


def test_the_docs_mcp_example_runs_on_the_local_model(local_gguf: Path, tmp_path: Path) -> None:
    """The MCP lines of docs/mcp.md as a user runs them from a checkout: the shipped example server
    over stdio, then over streamable HTTP, each one ``--once`` on the default local model."""
    (block,) = re.findall(r"^```shell\n(.*?)^```$", _docs_mcp_page(), re.M | re.S)
    lines = [ln for ln in block.splitlines() if ln.strip()]
    assert len(lines) == 3 and lines[1].startswith("python examples/mcp_notes.py --http")
    port = _free_port()
    chats = [_docs_argv(lines[0], port), _docs_argv(lines[2], port)]
    assert all(argv[0] == "toolwire" and "--once" in argv for argv in chats)
    done = _toolwire(*chats[0][1:], home=tmp_path)
    assert done.returncode == 0, done.stderr
    outputs = [done.stdout]
    with serving(_docs_argv(lines[1], port), port):
        done = _toolwire(*chats[1][1:], home=tmp_path)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    # each call ran in the example server: only it knows the notes' texts
    assert '→ read_note({"name": "todo"})\n← buy milk\n' in outputs[0]
    assert '→ read_note({"name": "plan"})\n← ship it\n' in outputs[1]


def test_the_docs_mcp_config_is_what_chat_reads_and_uses(
    tmp_path: Path,
    upstream: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The config file of docs/mcp.md, both servers up (the example server over stdio and over
    streamable HTTP): chat offers the notes tools twice, the HTTP ones prefixed, and a
    prefixed call runs in the HTTP server under the server's own name."""
    (toml,) = re.findall(r"^```toml\n(.*?)^```$", _docs_mcp_page(), re.M | re.S)
    port = _free_port()
    config = tmp_path / "mcp.toml"
    config.write_text(toml.replace("8001", str(port)))
    specs = read_config(str(config))
    assert [(s.command, s.url, s.name, s.prefix, s.timeout) for s in specs] == [
        (("python", "examples/mcp_notes.py"), "", "mcp_notes", "", None),
        ((), f"http://127.0.0.1:{port}/mcp", "remote", "remote", 30.0),
    ]
    monkeypatch.chdir(SERVER.parent.parent)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    notes = ["read_note", "list_notes", "add_note", "delete_note"]
    script(upstream, "remote_add_note", {"name": "x", "text": "from afar"}, "Added.")
    example = [sys.executable, "examples/mcp_notes.py", "--http", str(port)]
    with serving(example, port):
        code, out, err = run_chat(
            upstream, "--mcp-config", str(config), monkeypatch=monkeypatch, capsys=capsys
        )
    assert code == 0, err
    assert offered(upstream) == notes + [f"remote_{n}" for n in notes]
    assert "← added x\nAdded.\n" in out and "toolwire:" not in err
