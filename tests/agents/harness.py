"""Running the real coding agents (Claude Code, Codex) against a real ``toolwire serve``.

The gateway runs as a subprocess (``python -m toolwire serve --upstream URL``) in front of
a :class:`~tests.agents.upstream.ScriptedUpstream`; each program runs in a temporary work
directory with a temporary ``HOME`` (and ``CODEX_HOME``) and an environment built from
nothing but ``PATH``, so neither this machine's configuration nor its keys reach it, and
with a timeout.

The programs are found in ``tools/agents/node_modules/.bin`` (``scripts/test`` installs the
pinned versions there), else on ``PATH``. A missing program fails the test under CI (env
``CI`` set) and skips it elsewhere, saying how to install it.

Set-up that works as root in a container (found by trying, see
``tests/fixtures/agents/README.md``): Claude Code refuses ``--dangerously-skip-permissions``
as root, so print mode is given ``--allowedTools`` for the tools the script calls; Codex runs
with ``--sandbox workspace-write`` (its bundled bubblewrap works here) and stdin closed (else
it waits for more input).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.serving import wait_healthy

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "tools" / "agents" / "node_modules" / ".bin"
INSTALL = "scripts/test (npm install --prefix tools/agents)"
#: A model name Codex 0.171.0 has in its catalogue (``codex debug models``): it gets the
#: ``exec_command`` shell and the ``apply_patch`` custom tool. Codex's default model sends
#: its tools in "code mode" instead, and an unknown name gets no apply_patch.
CODEX_MODEL = "gpt-5.5"
TIMEOUT = 180.0


def program(name: str) -> str:
    """The path of ``claude`` or ``codex``: the pinned install, else ``PATH``."""
    pinned = BIN / name
    if pinned.exists():
        return str(pinned)
    found = shutil.which(name)
    if found:
        return found
    message = f"{name} is not installed: run {INSTALL}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def gateway(upstream_url: str, log: Path, *extra: str) -> Iterator[str]:
    """``toolwire serve`` before ``upstream_url``, as a subprocess; yields its root URL."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("OPENAI_API_KEY", None)
    command = [sys.executable, "-m", "toolwire", "serve", "--upstream", upstream_url]
    command += ["--port", str(port), *extra]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    root = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, root, log)
        yield root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Run:
    """What a program did: its exit code, its output, and the files it left."""

    returncode: int
    stdout: str
    stderr: str
    workdir: Path

    def explain(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }
    env.update(extra)
    return env


def _run(command: Sequence[str], workdir: Path, env: dict[str, str]) -> Run:
    try:
        done = subprocess.run(
            list(command),
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return Run(-1, out, f"timed out after {TIMEOUT} s\n{err}", workdir)
    return Run(done.returncode, done.stdout, done.stderr, workdir)


def run_claude(
    root: str,
    prompt: str,
    tmp: Path,
    *,
    tools: str = "Bash",
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Run:
    """``claude -p PROMPT`` on its default model (no ``--model``), against the gateway's
    Messages API, telemetry and non-essential traffic off; ``extra`` arguments after, ``env``
    more environment."""
    home, work = tmp / "home", tmp / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    environment = _env(
        home,
        ANTHROPIC_BASE_URL=root,
        ANTHROPIC_API_KEY="dummy",
        DISABLE_TELEMETRY="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        **(env or {}),
    )
    command = [program("claude"), "-p", prompt, "--allowedTools", tools, *extra]
    return _run(command, work, environment)


CODEX_CONFIG = """\
model_provider = "toolwire"

[model_providers.toolwire]
name = "toolwire"
base_url = "{root}/v1"
wire_api = "responses"
env_key = "TOOLWIRE_TOKEN"
"""


def run_codex(
    root: str, prompt: str, tmp: Path, *, model: str = CODEX_MODEL, extra: Sequence[str] = ()
) -> Run:
    """``codex exec`` with a provider block naming the gateway's Responses API; the last
    message is read from ``--output-last-message`` (``Run.stdout``), what Codex printed is
    ``Run.stderr``; ``extra`` arguments before the prompt."""
    home, codex_home, work = tmp / "home", tmp / "codex", tmp / "work"
    for d in (home, codex_home, work):
        d.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(CODEX_CONFIG.format(root=root))
    last = tmp / "last-message.txt"
    env = _env(home, CODEX_HOME=str(codex_home), TOOLWIRE_TOKEN="dummy")
    command = [program("codex"), "exec", "--skip-git-repo-check", "--sandbox", "workspace-write"]
    command += ["-m", model, "-o", str(last), *extra, prompt]
    run = _run(command, work, env)
    said = last.read_text() if last.exists() else ""
    return Run(run.returncode, said, run.stdout + run.stderr, work)


#: Gemini CLI's settings for a run: the Gemini API with a key (its auth dialog never opens),
#: no usage statistics, no update check.
GEMINI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"disableAutoUpdate": True},
}
#: A concrete model name: Gemini CLI's default (``auto``) first asks a classifier model,
#: which a scripted model does not answer.
GEMINI_MODEL = "gemini-2.5-flash"


def run_gemini(
    root: str, prompt: str, tmp: Path, *, model: str = GEMINI_MODEL, extra: Sequence[str] = ()
) -> Run:
    """``gemini -p PROMPT --yolo`` against the gateway's Gemini API
    (``GOOGLE_GEMINI_BASE_URL``), in a trusted work directory; ``extra`` arguments after."""
    home, work = tmp / "home", tmp / "work"
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    work.mkdir(exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_SETTINGS))
    environment = _env(
        home,
        GEMINI_API_KEY="dummy",
        GOOGLE_GEMINI_BASE_URL=root,
        GEMINI_CLI_TRUST_WORKSPACE="true",
        GEMINI_CLI_NO_RELAUNCH="true",
    )
    command = [program("gemini"), "-p", prompt, "--yolo", "-m", model, *extra]
    return _run(command, work, environment)


def run_qwen(root: str, prompt: str, tmp: Path, auth: str, model: str) -> Run:
    """``qwen -p PROMPT --yolo --auth-type AUTH -m MODEL`` against the gateway: ``openai``
    (Chat Completions), ``gemini`` (the Gemini API) or ``anthropic`` (Messages), its keys and
    base URLs in the environment and its settings in a ``QWEN_HOME`` of the test's own."""
    home, work, qwen_home = tmp / "home", tmp / "work", tmp / "qwen"
    for d in (home, work, qwen_home):
        d.mkdir(exist_ok=True)
    settings = {"security": {"auth": {"selectedType": auth}}}
    (qwen_home / "settings.json").write_text(json.dumps(settings))
    environment = _env(
        home,
        QWEN_HOME=str(qwen_home),
        OPENAI_BASE_URL=f"{root}/v1",
        OPENAI_API_KEY="dummy",
        GOOGLE_GEMINI_BASE_URL=root,
        GEMINI_API_KEY="dummy",
        ANTHROPIC_BASE_URL=root,
        ANTHROPIC_API_KEY="dummy",
        QWEN_CODE_SUPPRESS_YOLO_WARNING="1",
    )
    command = [program("qwen"), "-p", prompt, "--yolo", "--auth-type", auth, "-m", model]
    return _run(command, work, environment)
