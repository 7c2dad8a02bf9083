"""Claude Code, the real program, through ``toolwire serve``'s Messages API to a scripted
model: it runs a Bash command the model asked for and prints the model's final answer.

Claude Code runs on its default model name (no ``--model``), so the gateway is what a user
gets with nothing but ``ANTHROPIC_BASE_URL`` set. The scripted upstream writes the call
once as text (a weak model: the gateway has to read it) and once as native, streamed
``tool_calls`` deltas; both must end the same way: the command's output reached the model
in the tool result, and Claude Code printed the scripted answer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.agents.harness import gateway, run_claude
from tests.agents.upstream import Call, ScriptedUpstream, answer, shell, tool_results

MARKER = "toolwire-bash-ok"
FINAL = "The command printed the marker. All done."


@pytest.mark.parametrize("mode", ["text", "native"])
def test_claude_code_runs_bash_and_answers(mode: str, tmp_path: Path) -> None:
    steps = [shell(f"echo {MARKER} && echo {MARKER} > out.txt"), answer(FINAL)]
    up = ScriptedUpstream(steps, mode=mode, delay=0.002)
    with up, gateway(up.base_url, tmp_path / "gateway.log") as root:
        run = run_claude(root, "Print the marker with Bash, then say you are done.", tmp_path)
    log = (tmp_path / "gateway.log").read_text()
    assert up.requests, f"nothing reached the upstream\n{run.explain()}\n{log}"
    # the first request offered Claude Code's own tools, Bash among them
    first = up.requests[0]
    assert "Bash" in [t["function"]["name"] for t in first.get("tools", [])]
    assert run.returncode == 0, f"{run.explain()}\n--- gateway\n{log}"
    # Claude Code ran the command: the file is there and its output reached the model
    assert (run.workdir / "out.txt").read_text().strip() == MARKER
    results = tool_results(up.requests[-1])
    assert any(MARKER in r for r in results), up.requests[-1].get("messages")
    assert run.stdout.strip() == FINAL, run.explain()


def test_claude_code_shows_the_tokens_the_model_used(tmp_path: Path) -> None:
    """The usage the model reported on each streamed turn (asked for with
    ``stream_options.include_usage``) is what Claude Code adds up and shows."""
    up = ScriptedUpstream([shell(f"echo {MARKER}"), answer(FINAL)], mode="native")
    with up, gateway(up.base_url, tmp_path / "gateway.log") as root:
        run = run_claude(root, "Print the marker.", tmp_path, extra=("--output-format", "json"))
    assert run.returncode == 0, run.explain()
    shown = json.loads(run.stdout)
    assert shown["result"] == FINAL
    assert len(up.usage) == len(up.requests) == 2, "the upstream was not asked for its usage"
    assert shown["usage"]["input_tokens"] == sum(u["prompt_tokens"] for u in up.usage)
    assert shown["usage"]["output_tokens"] == sum(u["completion_tokens"] for u in up.usage)


def _search(tools: Mapping[str, Mapping[str, Any]]) -> Call | None:
    """The model's first step: load the calculator's schema with Claude Code's ToolSearch."""
    if "ToolSearch" not in tools or "mcp__calc__calculator" in tools:
        return None
    return Call("ToolSearch", {"query": "select:mcp__calc__calculator"})


def _calculate(tools: Mapping[str, Mapping[str, Any]]) -> Call | None:
    """Then the deferred tool, once it is loaded (and only then offered)."""
    if "mcp__calc__calculator" not in tools:
        return None
    return Call("mcp__calc__calculator", {"a": 2, "b": 3, "op": "+"})


@pytest.mark.parametrize("mode", ["text", "native"])
def test_claude_code_s_tool_search_loads_a_deferred_mcp_tool(mode: str, tmp_path: Path) -> None:
    """With ``ENABLE_TOOL_SEARCH=true`` Claude Code sends its MCP tools deferred (named in
    its system prompt, a ``defer_loading`` placeholder in its tools): the model searches,
    Claude Code answers with ``tool_reference`` blocks, and from then on the tool is offered
    in full, so the model calls it and Claude Code runs it on its MCP server."""
    mcp = tmp_path / "mcp.json"
    server = Path(__file__).parent / "agents" / "mcp_calculator.py"
    mcp.write_text(
        json.dumps({"mcpServers": {"calc": {"command": sys.executable, "args": [str(server)]}}})
    )
    steps = [_search, _calculate, answer("2 + 3 is 5.")]
    up = ScriptedUpstream(steps, mode=mode)
    with up, gateway(up.base_url, tmp_path / "gateway.log") as root:
        run = run_claude(
            root,
            "Use the calculator to add 2 and 3.",
            tmp_path,
            tools="Bash,ToolSearch,mcp__calc__calculator",
            extra=("--mcp-config", str(mcp), "--strict-mcp-config"),
            env={"ENABLE_TOOL_SEARCH": "true"},
        )
    log = (tmp_path / "gateway.log").read_text()
    assert run.returncode == 0, f"{run.explain()}\n--- gateway\n{log}"
    names = [[t["function"]["name"] for t in r.get("tools", [])] for r in up.requests]
    # deferred: neither the placeholder nor the MCP tool is offered before the search
    assert "DeferredToolPlaceholder" not in names[0] and "mcp__calc__calculator" not in names[0]
    assert "mcp__calc__calculator" in names[-1]
    assert any("5" in r for r in tool_results(up.requests[-1])), up.requests[-1]["messages"]
    assert run.stdout.strip() == "2 + 3 is 5.", run.explain()
