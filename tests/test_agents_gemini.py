"""Gemini CLI (and Qwen Code, in each of its three modes), the real programs, through
``toolwire serve``'s Gemini API (``GOOGLE_GEMINI_BASE_URL``) to a scripted model: it runs a
shell command the model asked for and prints the model's final answer.

The scripted upstream writes the call once as text (a weak model: the gateway has to read
it) and once as native ``tool_calls``; both must end the same way: Gemini CLI ran the
command (the file is there), its output reached the model as the tool's result, and Gemini
CLI printed the scripted answer.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.agents.harness import gateway, run_gemini, run_qwen
from tests.agents.upstream import ScriptedUpstream, answer, shell, tool_results

MARKER = "toolwire-gemini-ok"
FINAL = "The command printed the marker. All done."


@pytest.mark.parametrize("mode", ["text", "native"])
def test_gemini_cli_runs_a_shell_command_and_answers(mode: str, tmp_path: Path) -> None:
    steps = [shell(f"echo {MARKER} && echo {MARKER} > out.txt"), answer(FINAL)]
    up = ScriptedUpstream(steps, mode=mode, delay=0.002)
    with up, gateway(up.base_url, tmp_path / "gateway.log") as root:
        run = run_gemini(root, "Print the marker with the shell, then say you are done.", tmp_path)
    log = (tmp_path / "gateway.log").read_text()
    assert up.requests, f"nothing reached the upstream\n{run.explain()}\n{log}"
    first = up.requests[0]
    assert "run_shell_command" in [t["function"]["name"] for t in first.get("tools", [])]
    assert run.returncode == 0, f"{run.explain()}\n--- gateway\n{log}"
    assert (run.workdir / "out.txt").read_text().strip() == MARKER
    results = tool_results(up.requests[-1])
    assert any(MARKER in r for r in results), up.requests[-1].get("messages")
    assert run.stdout.strip() == FINAL, run.explain()


def _served_apis(root: str) -> set[str]:
    """The client APIs the gateway answered turns in, from its metrics."""
    text = httpx.get(f"{root}/metrics").text
    found = re.findall(r'^toolwire_requests_total\{api="(\w+)"', text, re.M)
    return set(found) - {"health", "models", "count_tokens", "other"}


@pytest.mark.parametrize(
    ("auth", "model", "api"),
    [
        ("openai", "local", "chat"),
        ("gemini", "gemini-2.5-flash", "gemini"),
        ("anthropic", "claude-sonnet-4-5", "messages"),
    ],
)
def test_qwen_code_runs_a_shell_command_in_each_of_its_modes(
    auth: str, model: str, api: str, tmp_path: Path
) -> None:
    """Qwen Code speaks Chat Completions, the Gemini API or Messages, as its auth type says:
    through each, it runs the command and answers."""
    steps = [shell(f"echo {MARKER} && echo {MARKER} > out.txt"), answer(FINAL)]
    up = ScriptedUpstream(steps, mode="text")
    with up, gateway(up.base_url, tmp_path / "gateway.log") as root:
        run = run_qwen(
            root, "Print the marker with the shell, then say you are done.", tmp_path, auth, model
        )
        served = _served_apis(root)
    assert run.returncode == 0, run.explain()
    assert served == {api}, served
    assert (run.workdir / "out.txt").read_text().strip() == MARKER
    assert any(MARKER in r for r in tool_results(up.requests[-1]))
    assert run.stdout.strip() == FINAL, run.explain()
