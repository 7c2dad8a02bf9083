"""A small MCP server, made with the official SDK (``pip install '.[mcp]'``): notes kept in
memory, with one tool of each kind the annotations tell apart.

Over stdio (the way ``toolwire chat --mcp "python examples/mcp_notes.py"`` runs it), or over
streamable HTTP with ``python examples/mcp_notes.py --http 8001`` (then
``toolwire chat --mcp http://127.0.0.1:8001/mcp``).
"""

from __future__ import annotations

import argparse

from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notes")
notes = {"todo": "buy milk", "plan": "ship it"}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_note(name: str) -> str:
    """Read a note by its name."""
    return notes.get(name, f"no note named {name}")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def list_notes() -> list[str]:
    """The names of every note."""
    return sorted(notes)


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def add_note(name: str, text: str) -> str:
    """Add a note, or replace the one of that name."""
    notes[name] = text
    return f"added {name}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def delete_note(name: str) -> str:
    """Delete a note for good."""
    return f"deleted {name}" if notes.pop(name, None) is not None else f"no note named {name}"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve over streamable HTTP")
    args = parser.parse_args()
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run("stdio")
