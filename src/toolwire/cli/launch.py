"""``toolwire launch claude|codex|opencode|qwen|gemini [-- ARGS]``: one command to start a
coding agent on any model, through the gateway.

It finds or starts the gateway — ``--gateway URL`` names one already serving; with no model
named, one answering at ``127.0.0.1:8000`` is used; else ``toolwire serve`` is started for
this run with the model flags given (``--model``, ``--upstream``, ``--ollama``, ``--config``:
as ``serve`` reads them) on a free port, and stopped when the agent exits. It writes the
agent's own settings (:mod:`.agents`) in a profile of its own — a throwaway directory,
removed after, or with ``--profile NAME`` one kept under ``$TOOLWIRE_HOME/launch/AGENT/NAME``
for the next launch — never over the user's own settings, and runs the agent with the
arguments after ``--``. ``--print`` shows what it would set, and runs nothing.

The model's context (which the agents' output and context limits are fitted to) is
``--ctx``, else a local model's default context as ``serve`` loads it, else what the
upstream says (llama-server's ``/props``, vLLM's ``max_model_len``), else 32,768 tokens.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ..errors import ToolwireError, UsageError
from .agents import AGENTS, Setup, Target
from .common import MODEL_HELP, OLLAMA_HELP, OLLAMA_URL

__all__ = ["add_launch"]

#: Where a gateway may already be serving (``toolwire serve``'s default address).
DEFAULT_GATEWAY = "http://127.0.0.1:8000"
#: The context assumed when nothing says what it is.
FALLBACK_CONTEXT = 32_768
#: Seconds a started gateway has to answer ``/health``.
START_WAIT = 120.0
#: How each agent is installed, for the error that says it is missing.
INSTALL = {
    "claude": "npm install -g @anthropic-ai/claude-code",
    "codex": "npm install -g @openai/codex",
    "opencode": "npm install -g opencode-ai",
    "qwen": "npm install -g @qwen-code/qwen-code",
    "gemini": "npm install -g @google/gemini-cli",
}
#: ``serve``'s flags that name the model (given to the gateway launch starts).
_SERVE_FLAGS = (
    ("model", "--model"),
    ("ctx", "--ctx"),
    ("upstream", "--upstream"),
    ("upstream_model", "--upstream-model"),
    ("upstream_key", "--upstream-key"),
    ("engine", "--engine"),
    ("tool_format", "--tool-format"),
    ("config", "--config"),
)


def _get(url: str, key: str | None = None, timeout: float = 2.0) -> Any:
    """The JSON at ``url`` (None: no answer, or not JSON)."""
    import httpx

    headers = {"authorization": f"Bearer {key}"} if key else {}
    try:
        reply = httpx.get(url, headers=headers, timeout=timeout)
        return reply.json() if reply.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _healthy(root: str) -> bool:
    found = _get(f"{root}/health", timeout=0.5)
    return isinstance(found, dict) and found.get("status") == "ok"


def _names_a_model(args: argparse.Namespace) -> bool:
    return any(getattr(args, k) for k in ("model", "upstream", "config")) or (
        args.ollama is not None
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _gateway(args: argparse.Namespace, log: Path) -> Iterator[str]:
    """The gateway's root URL: the one named, the one at the default address when no model
    is named, or one started here (stopped when the block ends)."""
    if args.gateway:
        root = args.gateway.rstrip("/").removesuffix("/v1")
        if not _healthy(root):
            raise UsageError(f"no toolwire gateway answers at {root}/health")
        yield root
        return
    if not _names_a_model(args) and _healthy(DEFAULT_GATEWAY):
        print(f"toolwire: using the gateway at {DEFAULT_GATEWAY}", file=sys.stderr)
        yield DEFAULT_GATEWAY
        return
    port = _free_port()
    command = [sys.executable, "-m", "toolwire", "serve", "--port", str(port)]
    for attr, flag in _SERVE_FLAGS:
        value = getattr(args, attr)
        if value is not None:
            command += [flag, str(value)]
    if args.ollama is not None:
        command += ["--ollama", args.ollama]
    if args.api_key:
        command += ["--api-key", args.api_key]
    root = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_WAIT
        while not _healthy(root):
            if proc.poll() is not None or time.monotonic() > deadline:
                said = log.read_text(errors="replace")[-2000:]
                raise UsageError(f"the gateway did not start:\n{said}")
            time.sleep(0.1)
        print(f"toolwire: serving at {root} for this run (its log: {log})", file=sys.stderr)
        yield root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _context(args: argparse.Namespace) -> int:
    """The model's context in tokens (see the module)."""
    if args.ctx:
        return int(args.ctx)
    if args.upstream:
        base = args.upstream.rstrip("/").removesuffix("/v1")
        props = _get(f"{base}/props")  # llama-server
        settings = props.get("default_generation_settings") if isinstance(props, dict) else None
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        if isinstance(n_ctx, int) and n_ctx > 0:
            return n_ctx
        listed = _get(f"{base}/v1/models")  # vLLM
        for entry in listed.get("data", []) if isinstance(listed, dict) else []:
            size = entry.get("max_model_len") if isinstance(entry, dict) else None
            if isinstance(size, int) and size > 0:
                return size
        return FALLBACK_CONTEXT
    if args.ollama is None and not args.config and not args.gateway:
        from ..backends.context import agent_context
        from ..models import local_model

        try:
            return agent_context(local_model(args.model))
        except (OSError, ValueError, ToolwireError):
            return FALLBACK_CONTEXT
    return FALLBACK_CONTEXT


def _served_model(root: str, key: str | None) -> str:
    """The first model the gateway lists (one model answers to any name)."""
    listed = _get(f"{root}/v1/models", key)
    data = listed.get("data") if isinstance(listed, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return str(data[0].get("id") or "toolwire")
    return "toolwire"


def _profile(agent: str, name: str | None) -> tuple[Path, bool]:
    """The profile's directory, and whether it is thrown away after the run."""
    if name is None:
        return Path(tempfile.mkdtemp(prefix=f"toolwire-{agent}-")), True
    if not name.replace("-", "").replace("_", "").isalnum() or len(name) > 64:
        raise UsageError("--profile NAME: letters, digits, - and _ (at most 64)")
    from ..store.db import home

    where = home() / "launch" / agent / name
    where.mkdir(parents=True, exist_ok=True)
    return where, False


def _program(setup: Setup, agent: str, given: str | None) -> str:
    found = shutil.which(given or setup.program)
    if given and not found:
        raise UsageError(f"--program {given}: no such program")
    if not found:
        raise UsageError(f"{setup.program} is not installed: {INSTALL[agent]}")
    return found


def _shown(setup: Setup, program: str, rest: Sequence[str], profile: Path) -> str:
    lines = [f"# profile: {profile}"]
    for path, text in setup.files.items():
        lines += [f"# {profile / path}", text.rstrip()]
    lines += [f"{k}={v}" for k, v in setup.env.items()]
    lines.append(" ".join([program, *setup.argv, *rest]))
    return "\n".join(lines)


def _cmd_launch(args: argparse.Namespace) -> int:
    rest = list(args.rest)
    key = args.api_key or os.environ.get("TOOLWIRE_API_KEY") or "toolwire"
    profile, throwaway = _profile(args.agent, args.profile)
    try:
        if args.show:
            root = (args.gateway or DEFAULT_GATEWAY).rstrip("/").removesuffix("/v1")
            target = Target(root, key, "toolwire", _context(args))
            setup = AGENTS[args.agent](target, profile)
            print(_shown(setup, args.program or setup.program, rest, profile))
            return 0
        with _gateway(args, profile / "gateway.log") as root:
            target = Target(root, key, _served_model(root, args.api_key), _context(args))
            setup = AGENTS[args.agent](target, profile)
            program = _program(setup, args.agent, args.program)
            for path, text in setup.files.items():
                (profile / path).parent.mkdir(parents=True, exist_ok=True)
                (profile / path).write_text(text, encoding="utf-8")
            env = {**os.environ, **setup.env}
            # Ctrl-C is the agent's: launch waits for it to end, then stops the gateway
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                return subprocess.run([program, *setup.argv, *rest], env=env).returncode
            finally:
                signal.signal(signal.SIGINT, previous)
    finally:
        if throwaway:
            with suppress(OSError):
                shutil.rmtree(profile)


def add_launch(v: argparse.ArgumentParser) -> None:
    v.add_argument("agent", choices=sorted(AGENTS), help="the coding agent to start")
    v.add_argument("--model", help=MODEL_HELP)
    v.add_argument("--ctx", type=int, metavar="TOKENS", help="the model's context")
    v.add_argument("--upstream", metavar="URL", help="an OpenAI-compatible server")
    v.add_argument("--upstream-model", metavar="NAME", help="the model's name at the upstream")
    v.add_argument("--upstream-key", help="the upstream's key (default: $OPENAI_API_KEY)")
    v.add_argument("--engine", help="the engine behind --upstream (vllm, llama-server)")
    v.add_argument("--ollama", nargs="?", const=OLLAMA_URL, metavar="URL", help=OLLAMA_HELP)
    v.add_argument("--tool-format", metavar="FAMILY", help="the family the model writes calls in")
    v.add_argument("--config", metavar="FILE", help="the models, as serve --config takes them")
    v.add_argument(
        "--gateway",
        metavar="URL",
        help="a toolwire gateway already serving (default: one started for this run, or "
        f"the one at {DEFAULT_GATEWAY} when no model is named)",
    )
    v.add_argument("--api-key", help="the gateway's key (default: $TOOLWIRE_API_KEY)")
    v.add_argument(
        "--profile",
        metavar="NAME",
        help="keep the agent's settings and state under this name (default: a throwaway one)",
    )
    v.add_argument("--program", metavar="PATH", help="the agent's program (default: on PATH)")
    v.add_argument(
        "--print",
        dest="show",
        action="store_true",
        help="print the settings, environment and command, and run nothing",
    )
    v.set_defaults(run=_cmd_launch, rest=[])
    v.epilog = "Arguments after -- are the agent's own: toolwire launch claude -- -p 'hi'"
