"""A stdio MCP server's connection, read line by line within a bound, for :mod:`toolwire.mcp`.

The SDK's own stdio transport reads a line however long it grows, and meets a line it cannot
read (not JSON, or JSON that is not JSON-RPC) by logging its traceback and going on, so a
request waiting for that answer waits until its timeout. Here the server's output is read as
bytes: a line past :data:`MAX_LINE_BYTES`, or one that is not a JSON-RPC message, ends the
connection, and :attr:`StdioLink.problem` says in one line what the server did wrong (the
session sees the connection close, so a waiting request fails at once, and the connection's
owner tells the problem). A server that exits is a problem too, with its exit status.

The process is started and stopped by the SDK's own helpers (its own process group, stdin
closed, then the whole tree terminated), imported only when a server is connected.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, TextIO

__all__ = ["MAX_LINE_BYTES", "StdioLink", "parse_line"]

#: The longest line (one JSON-RPC message) a server may send, in bytes.
MAX_LINE_BYTES = 16 * 1024 * 1024


def parse_line(line: bytes) -> Any:
    """The JSON-RPC message one line holds; a :class:`ValueError` saying in words what is
    wrong with it. Pure: the SDK's message types decide what JSON-RPC is."""
    import mcp_types

    try:
        return mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        pass
    shown = line[:60].decode("utf-8", "replace")
    try:
        json.loads(line)
    except ValueError:
        raise ValueError(f"sent a line that is not JSON: {shown!r}") from None
    raise ValueError(f"sent JSON that is not a JSON-RPC message: {shown!r}")


class StdioLink:
    """One stdio server's transport (the SDK's ``Transport``: enter it for the session's read
    and write streams), with what went wrong with it in :attr:`problem`."""

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str] | None,
        errlog: TextIO,
        max_line: int = MAX_LINE_BYTES,
    ) -> None:
        self.command = list(command)
        self.env = dict(env) if env else None
        self.errlog = errlog
        self.max_line = max_line
        #: What the server did wrong, in one line (None while all is well).
        self.problem: str | None = None
        self._session: Any = None

    def _fail(self, problem: str) -> None:
        if self.problem is None:
            self.problem = problem

    async def __aenter__(self) -> Any:
        self._session = self._open()
        return await self._session.__aenter__()

    async def __aexit__(self, *exc: Any) -> bool | None:
        session, self._session = self._session, None
        return await session.__aexit__(*exc)  # type: ignore[no-any-return]

    @contextlib.asynccontextmanager
    async def _open(self) -> AsyncIterator[Any]:
        import anyio
        from mcp.client.stdio import (
            _create_platform_compatible_process,
            _stop_server_process,
            get_default_environment,
        )
        from mcp.shared.message import SessionMessage

        process = await _create_platform_compatible_process(
            command=self.command[0],
            args=self.command[1:],
            env=get_default_environment() | (self.env or {}),
            errlog=self.errlog,
        )
        to_session, read_stream = anyio.create_memory_object_stream[Any](0)
        write_stream, from_session = anyio.create_memory_object_stream[Any](0)

        async def read() -> None:
            assert process.stdout is not None
            buffer = bytearray()
            async with to_session:
                with contextlib.suppress(
                    anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream
                ):
                    async for chunk in process.stdout:
                        start = len(buffer)
                        buffer += chunk
                        cut = buffer.find(b"\n", start)
                        while cut >= 0:
                            line = bytes(buffer[:cut]).strip()
                            del buffer[: cut + 1]
                            if line:
                                try:
                                    message = parse_line(line)
                                except ValueError as exc:
                                    self._fail(str(exc))
                                    return
                                await to_session.send(SessionMessage(message))
                            cut = buffer.find(b"\n")
                        if len(buffer) > self.max_line:
                            self._fail(f"sent a line longer than {self.max_line} bytes")
                            return
                    with anyio.move_on_after(1.0):  # the exit status, when it comes soon
                        await process.wait()
                    self._fail(_ended(process))

        async def write() -> None:
            assert process.stdin is not None
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async with from_session:
                    async for message in from_session:
                        text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                        await process.stdin.send((text + "\n").encode())
            await to_session.aclose()  # the server cannot be written to: the session ends

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            tasks.start_soon(write)
            try:
                yield read_stream, write_stream
            finally:
                with anyio.CancelScope(shield=True):
                    for stream in (read_stream, write_stream):
                        await stream.aclose()
                    await _stop_server_process(process)
                tasks.cancel_scope.cancel()


def _ended(process: Any) -> str:
    code = getattr(process, "returncode", None)
    return "closed its output" if code is None else f"exited with status {code}"
