"""A one-tool MCP server over stdio (the official SDK), for the agents to be configured with.

Codex offers an MCP server's tools to the model as a ``namespace`` tool (Responses API),
so a test configured with this server sees that shape reach the gateway. Run it as
``python tests/agents/mcp_calculator.py``.
"""

from __future__ import annotations

from mcp.server import MCPServer

server = MCPServer("calc")


@server.tool()
def calculator(a: float, b: float, op: str = "+") -> str:
    """Computes ``a op b`` for op one of + - * /."""
    if op == "+":
        return str(a + b)
    if op == "-":
        return str(a - b)
    if op == "*":
        return str(a * b)
    if op == "/":
        return str(a / b) if b else "division by zero"
    return f"unknown op {op!r}"


if __name__ == "__main__":
    server.run("stdio")
