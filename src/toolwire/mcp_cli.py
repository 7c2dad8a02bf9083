"""MCP servers for ``toolwire chat``: ``--mcp COMMAND|URL`` (repeatable), ``--mcp-config
FILE`` (a TOML ``[[mcp]]`` list), the y/N question before a destructive tool runs.

The chat is sync and runs each reply on a fresh event loop, while an MCP session must stay
on the loop that opened it: :class:`McpHost` keeps one loop in a thread of its own for all
the servers' sessions, and their tools hand each call over to it. A server that cannot
start is one line on stderr and the chat goes on without it; so is one that dies later,
whose tools then answer as unavailable.

Two servers offering the same tool name: the second one's tool is left out, with a line
saying so and how to keep both (a ``prefix`` for one server in the config file).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from .errors import UsageError
from .loop import Confirm
from .mcp import CLOSE_TIMEOUT, CONNECT_TIMEOUT, McpServer, McpSpec, require_sdk
from .messages import ToolCall
from .tools import Tool, Toolbox

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found]

__all__ = ["McpHost", "chat_tools", "read_config"]

_KEYS = {"command", "url", "name", "prefix", "env", "timeout"}


def read_config(path: str) -> list[McpSpec]:
    """The servers a TOML file lists: ``[[mcp]]`` tables with ``command`` (a string, split
    as a shell would, or a list) or ``url``; optional ``name``, ``prefix``, ``env`` (a
    table) and ``timeout`` (seconds a call may run)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read MCP config {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"MCP config {path} is not TOML: {exc}") from None
    entries = data.get("mcp")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"MCP config {path} needs a list of [[mcp]] tables")
    return [_spec(entry, f"{path}: [[mcp]] #{i + 1}") for i, entry in enumerate(entries)]


def _spec(entry: dict[str, Any], where: str) -> McpSpec:
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown keys {unknown} (known: {sorted(_KEYS)})")
    command = entry.get("command", "")
    url = entry.get("url", "")
    if isinstance(command, str) and command and not url:
        base = McpSpec.parse(command)
    elif isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        base = McpSpec(command=tuple(command))
    elif isinstance(url, str) and url and not command:
        base = McpSpec(url=url)
    else:
        raise UsageError(f"{where}: give command (a string or a list) or url, one of them")
    env = entry.get("env", {})
    timeout = entry.get("timeout")
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise UsageError(f"{where}: env must be a table of strings")
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise UsageError(f"{where}: timeout must be a positive number of seconds")
    for key in ("name", "prefix"):
        if not isinstance(entry.get(key, ""), str):
            raise UsageError(f"{where}: {key} must be a string")
    return McpSpec(
        command=base.command,
        url=base.url,
        name=entry.get("name", ""),
        prefix=entry.get("prefix", ""),
        env=env,
        timeout=float(timeout) if timeout is not None else None,
    )


class McpHost:
    """Connects servers on an event loop in a background thread and gives their tools to
    sync code; ``warn`` gets each one-line problem (a server that would not start, a tool
    left out, a server that stopped)."""

    def __init__(
        self,
        specs: Sequence[McpSpec],
        *,
        warn: Callable[[str], None],
        connect_timeout: float = CONNECT_TIMEOUT,
        errlog: TextIO | None = None,
    ) -> None:
        require_sdk()  # without the SDK no server can come up: say how to install it
        self._warn = warn
        self._servers = [
            McpServer(s, connect_timeout=connect_timeout, errlog=errlog, on_lost=warn)
            for s in specs
        ]
        self._connect_timeout = connect_timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="toolwire-mcp", daemon=True
        )
        self._tools: list[Tool] = []
        self._destructive: set[str] = set()

    def __enter__(self) -> McpHost:
        self._thread.start()
        outcomes = self._run(self._connect_all(), self._connect_timeout + CLOSE_TIMEOUT + 5)
        owner: dict[str, str] = {}
        for server, outcome in zip(self._servers, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                self._warn(f"{outcome}; going on without it")
                continue
            for line in server.skipped():
                self._warn(line)
            for tool in server.tools():
                if tool.name in owner:
                    self._warn(
                        f"MCP server {server.name}: tool {tool.name!r} left out, as "
                        f"{owner[tool.name]} offers one of that name (give one server a "
                        "prefix in --mcp-config to keep both)"
                    )
                    continue
                owner[tool.name] = server.name
                self._tools.append(tool)
                hints = server.hints(tool.name)
                if hints is not None and hints.destructive:
                    self._destructive.add(tool.name)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _connect_all(self) -> list[BaseException | None]:
        return list(
            await asyncio.gather(*(s.connect() for s in self._servers), return_exceptions=True)
        )

    async def _close_all(self) -> None:
        await asyncio.gather(*(s.close() for s in self._servers), return_exceptions=True)

    def _run(self, work: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)

    def tools(self) -> list[Tool]:
        """The tools of every server that came up, names unique."""
        return list(self._tools)

    def destructive(self, name: str) -> bool:
        """Whether a tool may destroy something (its server says so, or says nothing)."""
        return name in self._destructive

    def close(self) -> None:
        """Close every session (stopping stdio servers), then the loop and its thread."""
        if not self._thread.is_alive():
            return
        try:
            self._run(self._close_all(), CLOSE_TIMEOUT * 2)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(CLOSE_TIMEOUT)
            if not self._thread.is_alive():
                self._loop.close()


def asker(host: McpHost, stdin: TextIO, out: TextIO, *, yes: bool = False) -> Confirm:
    """The question before a destructive tool runs: y runs it, anything else (or the end
    of the input) refuses it, and the model reads that it was refused."""

    def confirm(call: ToolCall) -> bool:
        if yes or not host.destructive(call.name):
            return True
        args = json.dumps(call.arguments, ensure_ascii=False)
        out.write(f"? {call.name}({args}) may change or delete things. Run it? [y/N] ")
        out.flush()
        answer = stdin.readline()
        if not answer.endswith("\n"):
            out.write("\n")
        return answer.strip().lower() in ("y", "yes")

    return confirm


@contextmanager
def chat_tools(
    commands: Sequence[str],
    config: str | None,
    *,
    yes: bool,
    stdin: TextIO,
    out: TextIO,
    warn: Callable[[str], None],
) -> Iterator[tuple[Toolbox | None, Confirm | None]]:
    """The chat's tools from ``--mcp`` and ``--mcp-config``, with the question to ask
    before a destructive one runs; ``(None, None)`` when no server is named."""
    specs = [McpSpec.parse(c) for c in commands]
    if config:
        specs += read_config(config)
    if not specs:
        yield None, None
        return
    with McpHost(specs, warn=warn) as host:
        yield Toolbox(host.tools()), asker(host, stdin, out, yes=yes)
