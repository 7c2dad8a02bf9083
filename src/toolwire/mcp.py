"""Tools from MCP servers, for any model: each server's tools become :class:`Tool` objects
the tool loop runs like local ones.

One async core, :class:`McpServer`: it owns one connection (a command run over stdio, or a
streamable HTTP URL), lists the server's tools page by page, and calls them. The connection
lives in a task of its own on the loop that connected it, because an MCP client session is
bound to the task group that opened it; a call made from another thread's loop (the sync
chat runs each reply on a fresh loop) is handed over to that loop, so one session serves
every reply. The official SDK (``pip install 'toolwire[mcp]'``) is imported only here, and
only when a server is connected.

What the MCP spec's annotations mean here, with its defaults for a tool that says nothing:
``readOnlyHint`` makes a read-only tool (the only kind offered in read-only mode); a tool
that is not read-only is destructive unless ``destructiveHint`` is false (``toolwire chat``
asks before it runs one), and is idempotent only with ``idempotentHint``. A call whose
connection drops mid-call may be tried again only if the tool is read-only or idempotent
(:class:`ToolUnavailable`); otherwise its outcome is unknown (:class:`ToolOutcomeUnknown`)
and it is never repeated. A call to a server that is not connected did nothing: unavailable.
Each call has the tool loop's timeout (the server's ``timeout``, else the conversation's
``tool_timeout``); a tool whose input schema has an ``operation_id`` parameter gets the loop's
operation id for the call there (the same on a retry), and the model neither sees nor sets it.

Results reach the model as text: text blocks as they are, structured content as JSON when
there is no text, images, audio and other blocks named in words
(``[image: image/png, 1234 bytes]``). An ``isError`` result raises :class:`McpToolError`
with the server's text, so the model reads a failed call it can act on.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shlex
import sys
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

from .errors import ToolwireError, UsageError
from .mcp_stdio import StdioLink
from .tools import _NAME, Tool, ToolOutcomeUnknown, ToolUnavailable

__all__ = [
    "McpConnectError",
    "McpServer",
    "McpSpec",
    "McpToolError",
    "ToolHints",
    "require_sdk",
    "result_text",
]

T = TypeVar("T")

#: Seconds a server has to start and answer the handshake and the tool listing.
CONNECT_TIMEOUT = 20.0
#: Pages of tools/list read at most: a server whose cursor never ends cannot hang a connect.
MAX_PAGES = 100
#: Seconds closing may take (the SDK then kills a stdio server's process tree).
CLOSE_TIMEOUT = 10.0
#: A tool parameter of this name is the loop's operation id, never the model's.
OPERATION_ID = "operation_id"

_INSTALL = "MCP servers need the official SDK: pip install 'toolwire[mcp]'"


class McpConnectError(ToolwireError):
    """An MCP server could not be started or reached, or did not answer its handshake."""


class McpToolError(ToolwireError):
    """An MCP server answered a call with an error (``isError``, or a JSON-RPC error); the
    message is the server's text, for the model to read."""


@dataclass(frozen=True)
class McpSpec:
    """How to reach one server: ``command`` (run over stdio) or ``url`` (streamable HTTP).

    ``name`` is for messages (derived when not given); ``prefix`` is put before each of its
    tools' names (``prefix_tool``), to tell apart two servers that offer the same name."""

    command: tuple[str, ...] = ()
    url: str = ""
    name: str = ""
    prefix: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    #: Seconds a call may run (None: the conversation's ``tool_timeout``).
    timeout: float | None = None

    def __post_init__(self) -> None:
        if bool(self.command) == bool(self.url):
            raise UsageError("an MCP server takes a command or a url, not both or neither")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise UsageError(f"MCP server url {self.url!r} must start with http:// or https://")
        if not self.name:
            object.__setattr__(self, "name", _derived_name(self))

    @classmethod
    def parse(cls, text: str) -> McpSpec:
        """``--mcp``'s value: a URL, or a command line (split as a shell would)."""
        text = text.strip()
        if text.startswith(("http://", "https://")):
            return cls(url=text)
        try:
            argv = tuple(shlex.split(text))
        except ValueError as exc:
            raise UsageError(f"cannot read the MCP command {text!r}: {exc}") from None
        if not argv:
            raise UsageError("an MCP command is empty")
        return cls(command=argv)


def _derived_name(spec: McpSpec) -> str:
    if spec.url:
        return spec.url.split("//", 1)[1].split("/", 1)[0]
    for arg in spec.command[1:]:
        if not arg.startswith("-"):
            return Path(arg).stem or arg
    return Path(spec.command[0]).stem


@dataclass(frozen=True)
class ToolHints:
    """A tool's MCP annotations, with the spec's defaults filled in."""

    read_only: bool
    destructive: bool
    idempotent: bool

    @classmethod
    def of(cls, annotations: Any) -> ToolHints:
        def hint(name: str) -> bool | None:
            value = getattr(annotations, name, None)
            return value if isinstance(value, bool) else None

        read_only = hint("read_only_hint") is True
        return cls(
            read_only=read_only,
            destructive=not read_only and hint("destructive_hint") is not False,
            idempotent=not read_only and hint("idempotent_hint") is True,
        )

    @property
    def retry_safe(self) -> bool:
        """Whether running it again after a lost answer can do no harm."""
        return self.read_only or self.idempotent


def require_sdk() -> Any:
    """The official MCP SDK, or a :class:`UsageError` saying how to install it."""
    try:
        import mcp
    except ImportError:
        raise UsageError(_INSTALL) from None
    return mcp


def _errlog(errlog: TextIO | None) -> TextIO:
    """Where a stdio server's stderr goes: a real file (a subprocess needs a descriptor)."""
    for stream in (errlog, sys.stderr, sys.__stderr__):
        if stream is None:
            continue
        try:
            stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        return stream
    raise UsageError("no stderr for the MCP server's log")


class McpServer:
    """One MCP server's connection and its tools: ``async with McpServer(spec) as server:
    toolbox = Toolbox(server.tools())``.

    ``on_lost`` is told, once, in one line, when a connected server goes away (it died, or
    its connection dropped); its tools then answer as unavailable."""

    def __init__(
        self,
        spec: McpSpec,
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
        errlog: TextIO | None = None,
        on_lost: Callable[[str], None] | None = None,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.connect_timeout = connect_timeout
        self._errlog = errlog
        self._on_lost = on_lost
        self._client: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Event | None = None
        self._lost: str | None = None
        self._tools: list[Tool] = []
        self._hints: dict[str, ToolHints] = {}
        self._remote: dict[str, str] = {}  # toolwire name -> the server's name
        self._listed: list[str] = []
        self._link: StdioLink | None = None

    async def __aenter__(self) -> McpServer:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Start or reach the server, shake hands and list its tools, within
        ``connect_timeout``; :class:`McpConnectError` says why not, in one line."""
        mcp = require_sdk()
        if self._owner is not None:
            raise UsageError(f"the MCP server {self.name} is already connected")
        if self.spec.url:
            target: Any = self.spec.url
        else:  # the server's own log goes to our stderr, as it writes it
            self._link = StdioLink(self.spec.command, self.spec.env, _errlog(self._errlog))
            target = self._link
        client = mcp.Client(target)
        self._loop = asyncio.get_running_loop()
        self._closing = asyncio.Event()
        ready: asyncio.Future[None] = self._loop.create_future()
        self._owner = asyncio.create_task(self._own(client, ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
            listed = await asyncio.wait_for(self._list(client), self.connect_timeout)
        except asyncio.TimeoutError:
            await self._abandon(ready)
            raise McpConnectError(
                f"MCP server {self.name} did not answer within {self.connect_timeout:g} s"
            ) from None
        except McpConnectError:
            await self._abandon(ready)
            raise
        except Exception as exc:
            await self._abandon(ready)
            raise McpConnectError(
                f"MCP server {self.name} could not list its tools: {self._why(exc)}"
            ) from None
        self._client = client
        self._make_tools(listed)

    async def _own(self, client: Any, ready: asyncio.Future[None]) -> None:
        """The connection's own task: it enters the session, waits until closed, and exits
        it in the same task, as the SDK's task groups require."""
        assert self._closing is not None
        try:
            async with client:
                if not ready.done():
                    ready.set_result(None)
                await self._closing.wait()
        except asyncio.CancelledError:
            # cancelled by connect itself (its timeout, its own cancellation): no one waits
            # for ready now, and an exception left in it would be reported, at its garbage
            # collection, as never retrieved
            ready.cancel()
            raise
        except BaseException as exc:
            reason = self._why(exc)
            if not ready.done():
                what = "could not be started" if self.spec.command else "could not be reached"
                ready.set_exception(McpConnectError(f"MCP server {self.name} {what}: {reason}"))
            else:
                self._mark_lost(reason)
            if not isinstance(exc, Exception):
                raise
        else:
            if not ready.done():
                ready.set_exception(McpConnectError(f"MCP server {self.name} closed at once"))
        finally:
            self._client = None

    async def _list(self, client: Any) -> list[Any]:
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await self._racing(client.list_tools(cursor=cursor))
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                return tools
        raise McpConnectError(f"MCP server {self.name} listed more than {MAX_PAGES} pages")

    def _make_tools(self, listed: list[Any]) -> None:
        for item in listed:
            name = f"{self.spec.prefix}_{item.name}" if self.spec.prefix else str(item.name)
            if not _NAME.match(name) or name in self._hints:
                continue  # reported by skipped()
            hints = ToolHints.of(item.annotations)
            schema = dict(item.input_schema or {"type": "object", "properties": {}})
            schema.setdefault("properties", {})
            properties = schema["properties"]
            owned = (
                [OPERATION_ID]
                if isinstance(properties, Mapping) and OPERATION_ID in properties
                else []
            )
            try:
                tool = Tool.from_schema(
                    name,
                    schema,
                    self._tool_function(str(item.name), hints),
                    description=str(item.description or item.title or ""),
                    read_only=hints.read_only,
                    side_effects=not hints.read_only,
                    session=owned,
                    timeout=self.spec.timeout,
                )
            except ToolwireError:
                continue
            self._tools.append(tool)
            self._hints[name] = hints
            self._remote[name] = str(item.name)
        self._listed = [str(item.name) for item in listed]

    def skipped(self) -> list[str]:
        """One line for each listed tool left out (a name toolwire cannot offer, twice
        listed, or a schema that is not an object)."""
        taken = set(self._remote.values())
        return [
            f"MCP server {self.name}: tool {n!r} left out (its name or schema cannot be offered)"
            for n in self._listed
            if n not in taken
        ]

    def tools(self) -> list[Tool]:
        """The server's tools, as listed when it connected."""
        return list(self._tools)

    def hints(self, name: str) -> ToolHints | None:
        """A tool's annotations (by its toolwire name), or None for a tool not from here."""
        return self._hints.get(name)

    @property
    def connected(self) -> bool:
        return self._client is not None and self._lost is None

    def _tool_function(self, remote: str, hints: ToolHints) -> Callable[..., Awaitable[str]]:
        async def call_mcp_tool(**arguments: Any) -> str:
            return await self._on_own_loop(self.call(remote, arguments, hints))

        call_mcp_tool.__name__ = remote
        return call_mcp_tool

    async def _on_own_loop(self, work: Coroutine[Any, Any, T]) -> T:
        """Run on the connection's loop; from another loop, hand it over and wait."""
        loop = self._loop
        try:
            if loop is None or asyncio.get_running_loop() is loop:
                return await work
            future = asyncio.run_coroutine_threadsafe(work, loop)
        except RuntimeError:  # the connection's loop has stopped
            work.close()
            raise ToolUnavailable(f"the MCP server {self.name} is closed") from None
        return await asyncio.wrap_future(future)

    async def call(
        self, name: str, arguments: Mapping[str, Any], hints: ToolHints | None = None
    ) -> str:
        """Call a tool by the server's name for it; its result as text for the model."""
        hints = hints or ToolHints(read_only=False, destructive=True, idempotent=False)
        client = self._client
        if client is None or self._lost is not None:
            why = f": {self._lost}" if self._lost else ""
            raise ToolUnavailable(f"the MCP server {self.name} is not connected{why}")
        try:
            result = await self._racing(client.call_tool(name, dict(arguments)))
        except _Dropped as exc:
            self._mark_lost(str(exc))
            what = f"the connection to the MCP server {self.name} was lost during the call"
            if hints.retry_safe:
                raise ToolUnavailable(what) from None
            raise ToolOutcomeUnknown(what) from None
        if result.is_error:
            raise McpToolError(result_text(result, error=True))
        return result_text(result)

    async def _racing(self, work: Awaitable[T]) -> T:
        """Await a request, unless the connection's task ends first (the SDK may leave a
        request waiting when the transport under it fails): then :class:`_Dropped`."""
        owner = self._owner
        task = asyncio.ensure_future(work)
        try:
            if owner is not None:
                await asyncio.wait({task, owner}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                raise _Dropped(self._lost or self._why(None))
            return task.result()
        except _Dropped:
            raise
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if _is_server_answer(exc) and not self._broken():
                raise McpToolError(_reason(exc)) from None
            raise _Dropped(self._why(exc)) from None
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    def _broken(self) -> bool:
        """Whether the server sent what cannot be read, or ended its output."""
        return self._link is not None and self._link.problem is not None

    def _why(self, exc: BaseException | None) -> str:
        """Why the connection failed, in one line: what the server did wrong when its
        link knows (the session's own error then only says the connection closed)."""
        if self._link is not None and self._link.problem is not None:
            return f"the server {self._link.problem}"
        return _reason(exc) if exc is not None else "the connection closed"

    def _mark_lost(self, reason: str) -> None:
        if self._lost is not None or (self._closing is not None and self._closing.is_set()):
            return
        self._lost = reason
        if self._closing is not None:
            self._closing.set()  # let the session end in its own task
        if self._on_lost is not None:
            self._on_lost(
                f"MCP server {self.name} stopped ({reason}); its tools are unavailable now"
            )

    async def _abandon(self, ready: asyncio.Future[None] | None = None) -> None:
        """Cancel the connection's task and wait for it a while; ``ready``, a connect's
        future given up, has its outcome taken, so nothing is reported unretrieved."""
        owner, self._owner = self._owner, None
        if owner is not None and not owner.done():
            owner.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(owner, CLOSE_TIMEOUT)
        if ready is not None and ready.done() and not ready.cancelled():
            ready.exception()

    async def close(self) -> None:
        """End the session (a stdio server is stopped); calls after it are unavailable."""
        owner = self._owner
        if owner is None:
            return
        if self._closing is not None:
            self._closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(owner), CLOSE_TIMEOUT)
        except (asyncio.TimeoutError, Exception):
            await self._abandon()
        self._owner = None
        self._client = None


class _Dropped(Exception):
    """The connection failed under a request: the answer will not come."""


def _is_server_answer(exc: BaseException) -> bool:
    """A JSON-RPC error the server sent (it answered), not the connection failing."""
    from mcp import MCPError
    from mcp_types.jsonrpc import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and getattr(exc, "code", None) != CONNECTION_CLOSED


def _reason(exc: BaseException) -> str:
    """One line for an error, looking inside the exception groups task groups raise."""
    while getattr(exc, "exceptions", None):  # an exception group: its first cause
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(exc, FileNotFoundError):
        return f"no such command: {exc.filename}"
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def result_text(result: Any, *, error: bool = False) -> str:
    """A tool's result as the model reads it: text blocks as they are, structured content
    as JSON when no text block carries it, every other block named in words."""
    parts: list[str] = []
    texts = 0
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text))
            texts += 1
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {block.mime_type}, {_size(block.data)} bytes]")
        elif kind == "resource_link":
            mime = f", {block.mime_type}" if block.mime_type else ""
            parts.append(f"[resource link: {block.name} {block.uri}{mime}]")
        elif kind == "resource":
            res = block.resource
            text = getattr(res, "text", None)
            if isinstance(text, str):
                parts.append(f"[resource {res.uri}]\n{text}")
            else:
                mime = f"{res.mime_type}, " if res.mime_type else ""
                parts.append(f"[resource {res.uri}: {mime}{_size(res.blob)} bytes]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    structured = getattr(result, "structured_content", None)
    if structured is not None and not texts:
        parts.insert(0, json.dumps(structured, ensure_ascii=False, default=str))
    if not parts:
        return "the tool failed and said nothing" if error else "done (no content)"
    return "\n".join(parts)


def _size(data: str) -> int:
    """The decoded size of base64 data, without decoding all of it when it is not base64."""
    try:
        return len(base64.b64decode(data, validate=True))
    except (ValueError, TypeError):
        return len(data)
