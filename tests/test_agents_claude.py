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
from pathlib import Path

import pytest

from tests.agents.harness import gateway, run_claude
from tests.agents.upstream import ScriptedUpstream, answer, shell, tool_results

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
