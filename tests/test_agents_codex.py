"""Codex, the real program (``codex exec``), through ``toolwire serve``'s Responses API to a
scripted model: it runs a shell command, and creates a file with ``apply_patch``.

Codex is configured with a provider block naming the gateway (``wire_api = "responses"``)
and a model name from its own catalogue (:data:`~tests.agents.harness.CODEX_MODEL`): that
name is what makes it offer ``apply_patch`` as a custom (free-form) tool, which the gateway
hands the upstream as a function taking one string. The scripted upstream writes each call
once as text and once as native streamed ``tool_calls`` deltas.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents.harness import gateway, run_codex
from tests.agents.upstream import ScriptedUpstream, answer, patch, shell, tool_results

MARKER = "toolwire-shell-ok"
FINAL = "Done: the command ran."
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello from toolwire\n*** End Patch\n"


def _offered(body: dict[str, object]) -> list[str]:
    tools = body.get("tools")
    assert isinstance(tools, list)
    return [t["function"]["name"] for t in tools]


@pytest.mark.parametrize("mode", ["text", "native"])
def test_codex_runs_a_shell_command(mode: str, tmp_path: Path) -> None:
    up = ScriptedUpstream([shell(f"echo {MARKER}"), answer(FINAL)], mode=mode)
    with up, gateway(up.base_url, tmp_path / "gateway.log") as root:
        run = run_codex(root, "Print the marker, then say you are done.", tmp_path)
    log = (tmp_path / "gateway.log").read_text()
    assert up.requests, f"nothing reached the upstream\n{run.explain()}\n{log}"
    assert "exec_command" in _offered(up.requests[0])
    assert run.returncode == 0, f"{run.explain()}\n--- gateway\n{log}"
    results = tool_results(up.requests[-1])
    assert any(MARKER in r for r in results), up.requests[-1].get("messages")
    assert run.stdout.strip() == FINAL, run.explain()


@pytest.mark.parametrize("mode", ["text", "native"])
def test_codex_applies_a_patch_then_runs_a_shell_command(mode: str, tmp_path: Path) -> None:
    steps = [patch(PATCH), shell("cat hello.txt"), answer(FINAL)]
    up = ScriptedUpstream(steps, mode=mode)
    with up, gateway(up.base_url, tmp_path / "gateway.log") as root:
        run = run_codex(root, "Create hello.txt, show it, then say you are done.", tmp_path)
    log = (tmp_path / "gateway.log").read_text()
    assert up.requests, f"nothing reached the upstream\n{run.explain()}\n{log}"
    # Codex's custom tool reached the model as a function it can call
    assert "apply_patch" in _offered(up.requests[0]), _offered(up.requests[0])
    assert run.returncode == 0, f"{run.explain()}\n--- gateway\n{log}"
    assert (run.workdir / "hello.txt").read_text() == "hello from toolwire\n", run.explain()
    results = tool_results(up.requests[-1])
    assert len(results) == 2, up.requests[-1].get("messages")
    assert "hello from toolwire" in results[1], results
    assert run.stdout.strip() == FINAL, run.explain()


def test_codex_shows_the_tokens_the_model_used(tmp_path: Path) -> None:
    """The usage the model reported on each streamed turn (asked for with
    ``stream_options.include_usage``) is what Codex adds up for the turn (``--json``)."""
    up = ScriptedUpstream([shell(f"echo {MARKER}"), answer(FINAL)], mode="native")
    with up, gateway(up.base_url, tmp_path / "gateway.log") as root:
        run = run_codex(root, "Print the marker.", tmp_path, extra=("--json",))
    assert run.returncode == 0, run.explain()
    events = [json.loads(line) for line in run.stderr.splitlines() if line.startswith("{")]
    (done,) = [e for e in events if e.get("type") == "turn.completed"]
    assert len(up.usage) == len(up.requests) == 2, "the upstream was not asked for its usage"
    assert done["usage"]["input_tokens"] == sum(u["prompt_tokens"] for u in up.usage)
    assert done["usage"]["output_tokens"] == sum(u["completion_tokens"] for u in up.usage)
