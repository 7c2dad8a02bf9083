"""The requests real Claude Code and Codex sent (``tests/fixtures/agents``), replayed to a
real ``toolwire serve`` before the scripted upstream: every one must be taken (200, no error
event in the stream), and what the agent said must reach the model: its tools (Claude
Code's Bash; Codex's shell and its ``apply_patch`` custom tool), its ``system`` messages
wherever they stand, and the tool results (the marker the capture's command printed).

Faster than driving the programs, and it pins the exact shapes a version of each sends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agents.harness import gateway
from tests.agents.upstream import ScriptedUpstream, answer, tool_results

FIXTURES = Path(__file__).parent / "fixtures" / "agents"
MARKER = "capture-marker-ok"
#: the headers a replay keeps (the rest are the client's own bookkeeping)
KEPT = ("anthropic-version", "anthropic-beta", "content-type", "accept", "user-agent")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ScriptedUpstream]]:
    log = tmp_path_factory.mktemp("gateway") / "gateway.log"
    up = ScriptedUpstream([answer("replayed")] * 10)
    with up, gateway(up.base_url, log) as root:
        yield root, up


def _requests(name: str) -> list[dict[str, Any]]:
    data = json.loads((FIXTURES / name).read_text())
    return [r for r in data["requests"] if r["method"] == "POST"]


def _replay(root: str, up: ScriptedUpstream, request: dict[str, Any]) -> dict[str, Any]:
    """Send one captured request; returns the body the upstream got for it."""
    before = len(up.requests)
    headers = {k: v for k, v in request["headers"].items() if k in KEPT}
    with httpx.stream(
        "POST", root + request["path"], json=request["body"], headers=headers, timeout=60
    ) as reply:
        text = reply.read().decode()
        assert reply.status_code == 200, text[:2000]
    for bad in ("event: error", "response.failed", '"type": "error"', '"type":"error"'):
        assert bad not in text, text[:2000]
    assert len(up.requests) == before + 1, "the request did not reach the upstream"
    return up.requests[-1]


def _offered(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def _said(body: dict[str, Any]) -> str:
    return json.dumps(body.get("messages"))


@pytest.mark.parametrize(
    "name", ["claude_code_messages.json", "claude_code_messages_local_model.json"]
)
def test_claude_code_requests_are_taken(name: str, served: tuple[str, ScriptedUpstream]) -> None:
    root, up = served
    first, second = _requests(name)
    got = _replay(root, up, first)
    assert "Bash" in _offered(got)
    # the system message Claude Code puts after the first user message reached the model
    assert "# Environment" in _said(got)
    got = _replay(root, up, second)
    assert any(MARKER in r for r in tool_results(got)), _said(got)[-2000:]


@pytest.mark.parametrize(
    ("name", "tools"),
    [
        ("codex_responses.json", {"exec_command", "apply_patch"}),
        ("codex_responses_apply_patch.json", {"exec_command", "apply_patch"}),
        ("codex_responses_mcp.json", {"exec_command", "apply_patch"}),
        ("codex_responses_unknown_model.json", {"exec_command"}),
    ],
)
def test_codex_requests_are_taken(
    name: str, tools: set[str], served: tuple[str, ScriptedUpstream]
) -> None:
    root, up = served
    requests = _requests(name)
    got = _replay(root, up, requests[0])
    assert tools <= set(_offered(got)), _offered(got)
    assert "Codex" in _said(got)  # its developer message, the system prompt
    for request in requests[1:]:
        got = _replay(root, up, request)
    results = tool_results(got)
    assert results, _said(got)[-2000:]


def test_codex_mcp_tool_found_by_search_reaches_the_model(
    served: tuple[str, ScriptedUpstream],
) -> None:
    """The MCP tool Codex returned from ``tool_search`` (a namespace) can be called: the model
    is offered it, under a name the gateway maps back to ``namespace`` + ``name``."""
    root, up = served
    requests = _requests("codex_responses_mcp.json")
    got = _replay(root, up, requests[1])
    assert any("calculator" in n for n in _offered(got)), _offered(got)
    got = _replay(root, up, requests[2])
    assert any("5.0" in r for r in tool_results(got)), _said(got)[-2000:]
