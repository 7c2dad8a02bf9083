"""``toolwire launch AGENT``, run as a user runs it, with each real agent: it starts the
gateway in front of a scripted model (``--upstream``), writes the agent's settings in a
profile of its own, and runs the agent with the arguments after ``--``; the agent runs the
shell command the model asks for and prints the model's answer. The user's own settings
(under ``HOME``) are never written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
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
    sessions = tmp_path / "home" / ".local" / "share" / "opencode" / "opencode.db"
    assert not sessions.exists(), "opencode kept its sessions outside the profile"
    if agent == "claude":  # no header that changes with each request: a kept prefix holds
        assert "billing-header" not in json.dumps(up.requests[0]["messages"][:2])
    # the throwaway profile is gone; no named one was made
    assert not (tmp_path / "toolwire" / "launch").exists()


def test_a_named_profile_is_kept_for_the_next_launch(tmp_path: Path) -> None:
    """The agent's own state in a kept profile survives the next launch (only what launch
    sets is written over), and its files are the user's alone: they hold the key."""
    kept = tmp_path / "toolwire" / "launch" / "claude" / "work"
    for _ in range(2):
        up = ScriptedUpstream([shell(f"echo {MARKER} > out.txt"), answer(FINAL)], mode="native")
        with up:
            run = _launch("claude", up.base_url, tmp_path, "--profile", "work")
        assert run.returncode == 0, run.stderr[-4000:]
        state = json.loads((kept / ".claude.json").read_text())
        assert state["hasCompletedOnboarding"] is True
        assert "userID" in state or "firstStartTime" in state, sorted(state)
        if _ == 0:
            own = {k: v for k, v in state.items() if k not in ("customApiKeyResponses",)}
    assert {k: state[k] for k in own} == own, "the agent's own state was written over"
    assert (kept / "settings.json").stat().st_mode & 0o077 == 0
    assert kept.stat().st_mode & 0o077 == 0


def test_the_gateway_is_named_a_model_or_refused(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HOME": str(tmp_path)}
    base = [sys.executable, "-m", "toolwire", "launch", "opencode"]
    for flags, said in (
        (["--upstream", "http://127.0.0.1:9/v1"], "--upstream needs --upstream-model"),
        (["--ollama"], "--ollama needs --model"),
    ):
        run = subprocess.run([*base, *flags], capture_output=True, text=True, env=env)
        assert run.returncode == 2 and said in run.stderr, run.stderr


def test_each_agent_is_pointed_at_the_gateway_and_its_profile(tmp_path: Path) -> None:
    target = Target("http://127.0.0.1:9", "sesame", "local", 32_768)
    for agent, make in AGENTS.items():
        setup = make(target, tmp_path)
        text = json.dumps([dict(setup.env), setup.argv]) + "".join(setup.files.values())
        assert "127.0.0.1:9" in text and "sesame" in text, agent
        # every setting the agent reads is under the profile
        paths = [v for v in setup.env.values() if v.startswith("/")]
        assert paths and all(Path(p).is_relative_to(tmp_path) for p in paths), agent
    made = AGENTS["claude"](target, tmp_path)
    claude = made.env
    assert "CLAUDE_CODE_USE_BEDROCK" in made.drop and "ANTHROPIC_MODEL" not in claude
    several = AGENTS["claude"](Target("http://h", "k", "qwen", 32_768, many=True), tmp_path)
    assert several.env["ANTHROPIC_MODEL"] == several.env["ANTHROPIC_SMALL_FAST_MODEL"] == "qwen"
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
    # (the agent is looked for before any gateway is: a missing one costs no start-up)
    run = subprocess.run(
        [*base, "--gateway", "http://127.0.0.1:9", "--program", "true"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 2 and "no toolwire gateway answers" in run.stderr


STAND_IN = """\
import os, signal, sys, time
signal.signal(signal.SIGINT, lambda *_: open(sys.argv[1] + ".int", "w").close())
with open(sys.argv[1], "w") as out:
    out.write(os.environ["OPENAI_BASE_URL"] + "\\n" + os.environ["QWEN_HOME"])
time.sleep(60)
"""


def test_a_ctrl_c_is_the_agent_s_and_a_stop_stops_the_gateway(tmp_path: Path) -> None:
    """A Ctrl-C at the terminal reaches the agent (which may cancel a turn with it) and not
    the gateway under it; launch stopped by a signal stops the gateway and removes the
    throwaway profile. The agent here is a stand-in that reports what it was given."""
    agent = tmp_path / "agent"
    agent.write_text(f"#!{sys.executable}\n{STAND_IN}")
    agent.chmod(0o755)
    said = tmp_path / "said"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HOME": str(tmp_path)}
    command = [sys.executable, "-m", "toolwire", "launch", "qwen", "--program", str(agent)]
    with ScriptedUpstream([answer(FINAL)]) as up:
        command += ["--upstream", up.base_url, "--upstream-model", "m", "--", str(said)]
        launch = subprocess.Popen(command, env=env, start_new_session=True)
        try:
            for _ in range(600):
                if said.exists() and said.read_text().count("\n") == 1:
                    break
                time.sleep(0.1)
            root, profile = said.read_text().split("\n")
            health = root.removesuffix("/v1") + "/health"
            os.killpg(launch.pid, signal.SIGINT)  # the terminal's Ctrl-C, to its group
            for _ in range(50):
                if Path(f"{said}.int").exists():
                    break
                time.sleep(0.1)
            assert Path(f"{said}.int").exists(), "the agent did not get the Ctrl-C"
            assert httpx.get(health).json() == {"status": "ok"}, "the gateway went with it"
            launch.send_signal(signal.SIGTERM)
            assert launch.wait(timeout=30) == 128 + signal.SIGTERM
        finally:
            if launch.poll() is None:
                launch.kill()
    with pytest.raises(httpx.HTTPError):
        httpx.get(health, timeout=2)
    assert not Path(profile).exists()
