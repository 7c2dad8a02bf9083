"""A real MCP server for the tests, made with the official SDK (``MCPServer``).

Run it as ``python tests/mcp_servers.py stdio --marker FILE`` or
``python tests/mcp_servers.py http PORT --marker FILE``. Every call appends one JSON line
to the marker file (the process id, the tool, its arguments), so a test can prove the call
ran here, in the server's process. ``--page-size N`` lists the tools N to a page.

The tools cover each MCP annotation and each kind of result: read-only, destructive,
idempotent, unannotated; text, structured content, an image, ``isError``; one that takes
its time, one that takes an operation id; and two that end the process mid-call (one
idempotent, one not).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Image
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ListToolsResult, ToolAnnotations

#: A 1x1 PNG, 68 bytes.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360"
    "000000000500010d0a2db40000000049454e44ae426082"
)

READ_ONLY = ToolAnnotations(read_only_hint=True)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True)
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False)
IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)


class PagedServer(MCPServer):
    """Lists its tools ``page_size`` to a page, the cursor being the next index."""

    page_size = 0

    async def _handle_list_tools(self, ctx: Any, params: Any) -> ListToolsResult:
        tools = await self.list_tools()
        if not self.page_size:
            return ListToolsResult(tools=tools)
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + self.page_size
        return ListToolsResult(
            tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None
        )


def build(marker: str | None) -> PagedServer:
    server = PagedServer("notes")
    notes = {"todo": "buy milk", "plan": "ship it"}

    def mark(tool: str, **arguments: Any) -> None:
        if marker:
            with open(marker, "a", encoding="utf-8") as f:
                f.write(json.dumps({"pid": os.getpid(), "tool": tool, "args": arguments}) + "\n")

    @server.tool(annotations=READ_ONLY)
    def read_note(name: str) -> str:
        """Read a note by its name."""
        mark("read_note", name=name)
        return notes.get(name, f"no note named {name}")

    @server.tool(annotations=ADDITIVE)
    def add_note(name: str, text: str) -> str:
        """Add a note."""
        mark("add_note", name=name, text=text)
        notes[name] = text
        return f"added {name}"

    @server.tool(annotations=DESTRUCTIVE)
    def delete_note(name: str) -> str:
        """Delete a note for good."""
        mark("delete_note", name=name)
        return f"deleted {name}" if notes.pop(name, None) is not None else f"no note {name}"

    @server.tool(annotations=IDEMPOTENT)
    def set_flag(name: str, value: bool) -> str:
        """Set a flag (setting it twice is the same as once)."""
        mark("set_flag", name=name, value=value)
        return f"{name}={value}"

    @server.tool()
    def plain(text: str) -> str:
        """A tool with no annotations at all."""
        mark("plain", text=text)
        return text.upper()

    @server.tool(annotations=READ_ONLY, structured_output=True)
    def stats() -> dict[str, int]:
        """How many notes there are, and their characters."""
        mark("stats")
        return {"notes": len(notes), "chars": sum(len(t) for t in notes.values())}

    @server.tool(annotations=READ_ONLY)
    def snapshot() -> Image:
        """A picture of the notes."""
        mark("snapshot")
        return Image(data=PNG, format="png")

    @server.tool(annotations=READ_ONLY)
    def fail(reason: str) -> str:
        """Always fails, with the reason given."""
        mark("fail", reason=reason)
        raise ToolError(f"the disk is full ({reason})")

    @server.tool(annotations=ADDITIVE)
    async def slow(seconds: float) -> str:
        """Takes its time (the server goes on serving other calls meanwhile)."""
        mark("slow", seconds=seconds)
        await anyio.sleep(seconds)
        return "finished"

    @server.tool(annotations=IDEMPOTENT)
    def book(room: str, operation_id: str) -> str:
        """Book a room; the same operation id books it once."""
        mark("book", room=room, operation_id=operation_id)
        return f"booked {room}"

    @server.tool(annotations=ADDITIVE)
    def crash() -> str:
        """Ends the server's process in the middle of the call."""
        mark("crash")
        os._exit(3)

    @server.tool(annotations=IDEMPOTENT)
    def crash_idempotent() -> str:
        """Ends the server's process in the middle of the call (idempotent)."""
        mark("crash_idempotent")
        os._exit(3)

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("port", nargs="?", type=int, default=0)
    parser.add_argument("--marker")
    parser.add_argument("--page-size", type=int, default=0)
    args = parser.parse_args()
    server = build(args.marker)
    server.page_size = args.page_size
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
