"""``toolwire launch AGENT``, run as a user runs it, with each real agent: it starts the
gateway in front of a scripted model (``--upstream``), writes the agent's settings in a
profile of its own, and runs the agent with the arguments after ``--``; the agent runs the
shell command the model asks for and prints the model's answer. The user's own settings
(under ``HOME``) are never written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agents.harness import BIN, ROOT, program
from tests.agents.upstream import ScriptedUpstream, answer, shell, tool_results
from toolwire.cli.agents import AGENTS, Target, output_tokens

MARKER = "toolwire-launch-ok"
FINAL = "The marker is printed. All done."
PROMPT = "Print the marker with the shell, then say you are done."
#: Each agent's own arguments for one prompt, without asking (as root in a container:
#: Claude Code is given its tool; Codex its sandbox; Qwen Code and Gemini CLI --yolo).
ARGS = {
    "claude": ["-p", PROMPT, "--allowedTools", "Bash"],
    "codex": ["exec", "--skip-git-repo-check", "--sandbox", "workspace-write", PROMPT],
    "opencode": ["run", PROMPT],
    "qwen": ["-p", PROMPT, "--yolo"],
    "gemini": ["-p", PROMPT, "--yolo"],
}
#: Where each agent keeps its settings in a user's home: launch must not write there.
OWN = {
    "claude": ".claude/settings.json",
    "codex": ".codex/config.toml",
    "opencode": ".config/opencode/opencode.json",
    "qwen": ".qwen/settings.json",
    "gemini": ".gemini/settings.json",
}


def _launch(agent: str, upstream: str, tmp: Path, *more: str) -> subprocess.CompletedProcess[str]:
    program(agent)  # installed, or the test fails under CI and skips elsewhere
    home, work = tmp / "home", tmp / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    env = {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "TOOLWIRE_HOME": str(tmp / "toolwire"),
        "PYTHONPATH": str(ROOT / "src"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        # a test's work directory is new: trusting it is the user's choice, made here
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }
    command = [sys.executable, "-m", "toolwire", "launch", agent, "--upstream", upstream]
    command += ["--upstream-model", "scripted", *more, "--", *ARGS[agent]]
    return subprocess.run(
        command,
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.parametrize("mode", ["text", "native"])
@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_launch_starts_the_agent_on_the_model(agent: str, mode: str, tmp_path: Path) -> None:
    steps = [shell(f"echo {MARKER} && echo {MARKER} > out.txt"), answer(FINAL)]
    up = ScriptedUpstream(steps, mode=mode)
    with up:
        run = _launch(agent, up.base_url, tmp_path)
    said = f"exit {run.returncode}\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr[-4000:]}"
    assert run.returncode == 0, said
    assert (tmp_path / "work" / "out.txt").read_text().strip() == MARKER, said
    assert any(MARKER in r for r in tool_results(up.requests[-1])), said
    assert FINAL in run.stdout, said
    assert not (tmp_path / "home" / OWN[agent]).exists(), "launch wrote the user's own settings"
    if agent == "claude":  # no header that changes with each request: a kept prefix holds
        assert "billing-header" not in json.dumps(up.requests[0]["messages"][:2])
    # the throwaway profile is gone; no named one was made
    assert not (tmp_path / "toolwire" / "launch").exists()


def test_a_named_profile_is_kept_for_the_next_launch(tmp_path: Path) -> None:
    up = ScriptedUpstream([shell(f"echo {MARKER} > out.txt"), answer(FINAL)], mode="native")
    with up:
        run = _launch("codex", up.base_url, tmp_path, "--profile", "work")
    assert run.returncode == 0, run.stderr[-4000:]
    kept = tmp_path / "toolwire" / "launch" / "codex" / "work"
    config = (kept / "config.toml").read_text()
    assert 'model = "gpt-5.5"' in config and 'wire_api = "responses"' in config
    assert any(kept.glob("sessions/**/*.jsonl")), "Codex kept no session in the profile"


def test_each_agent_is_pointed_at_the_gateway_and_its_profile(tmp_path: Path) -> None:
    target = Target("http://127.0.0.1:9", "sesame", "local", 32_768)
    for agent, make in AGENTS.items():
        setup = make(target, tmp_path)
        text = json.dumps(dict(setup.env)) + "".join(setup.files.values())
        assert "127.0.0.1:9" in text and "sesame" in text, agent
        # every setting the agent reads is under the profile
        paths = [v for v in setup.env.values() if v.startswith("/")]
        assert paths and all(Path(p).is_relative_to(tmp_path) for p in paths), agent
    claude = AGENTS["claude"](target, tmp_path).env
    assert claude["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "8192"
    assert claude["ENABLE_TOOL_SEARCH"] == "true"
    assert claude["CLAUDE_CODE_ATTRIBUTION_HEADER"] == "0"
    opencode = json.loads(AGENTS["opencode"](target, tmp_path).files["opencode.json"])
    limit = opencode["provider"]["toolwire"]["models"]["local"]["limit"]
    assert limit == {"context": 32_768, "output": 8192}
    assert (output_tokens(4096), output_tokens(1_000_000)) == (1024, 32_000)


def test_print_shows_the_set_up_and_runs_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TOOLWIRE_HOME": str(tmp_path)}
    command = [sys.executable, "-m", "toolwire", "launch", "gemini", "--print", "--ctx", "8192"]
    command += ["--gateway", "http://127.0.0.1:9/v1", "--", "-p", "hi"]
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9\n" in run.stdout
    assert run.stdout.rstrip().endswith("gemini -m toolwire -p hi")


def test_a_missing_agent_says_how_to_install_it(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT / "src")}
    base = [sys.executable, "-m", "toolwire", "launch", "qwen"]
    with ScriptedUpstream([answer(FINAL)]) as up:
        run = subprocess.run(
            [*base, "--upstream", up.base_url, "--upstream-model", "m"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert run.returncode == 2, run.stderr
    assert "qwen is not installed: npm install -g @qwen-code/qwen-code" in run.stderr
    run = subprocess.run(
        [*base, "--gateway", "http://127.0.0.1:9"], capture_output=True, text=True, env=env
    )
    assert run.returncode == 2 and "no toolwire gateway answers" in run.stderr
