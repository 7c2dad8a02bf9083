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
import json
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
from .agents import AGENTS, CODEX_MODEL, Setup, Target
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
#: ``serve``'s flags that name the model (given to the gateway launch starts; its keys go by
#: the environment).
_SERVE_FLAGS = (
    ("model", "--model"),
    ("ctx", "--ctx"),
    ("upstream", "--upstream"),
    ("upstream_model", "--upstream-model"),
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


def _toolwire_at(root: str, key: str | None) -> bool:
    """Whether a toolwire gateway serves at ``root`` (llama-server's ``/health`` says ok
    too: its model list says whose it is)."""
    if not _healthy(root):
        return False
    listed = _get(f"{root}/v1/models", key, timeout=1.0)
    data = listed.get("data") if isinstance(listed, dict) else None
    return isinstance(data, list) and any(
        isinstance(m, dict) and m.get("owned_by") == "toolwire" for m in data
    )


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
    key = args.api_key or os.environ.get("TOOLWIRE_API_KEY")
    if not _names_a_model(args) and _toolwire_at(DEFAULT_GATEWAY, key):
        print(f"toolwire: using the gateway at {DEFAULT_GATEWAY}", file=sys.stderr)
        yield DEFAULT_GATEWAY
        return
    port = _free_port()
    command = [sys.executable, "-m", "toolwire", "serve", "--port", str(port)]
    for attr, flag in _SERVE_FLAGS:
        value = getattr(args, attr)
        if value is not None and not (attr == "model" and args.config):
            command += [flag, str(value)]
    if args.ollama is not None:
        command += ["--ollama", args.ollama]
    env = dict(os.environ)  # keys by the environment: never in a command line others see
    if args.api_key:
        env["TOOLWIRE_API_KEY"] = args.api_key
    if args.upstream_key:
        env["OPENAI_API_KEY"] = args.upstream_key
    root = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        # a session of its own: a Ctrl-C at the terminal is the agent's, not the gateway's
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
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
        key = args.upstream_key or os.environ.get("OPENAI_API_KEY")
        props = _get(f"{base}/props", key)  # llama-server
        settings = props.get("default_generation_settings") if isinstance(props, dict) else None
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        if isinstance(n_ctx, int) and n_ctx > 0:
            return n_ctx
        listed = _get(f"{base}/v1/models", key)  # vLLM
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


def _served(root: str, key: str, asked: str | None) -> tuple[str, bool]:
    """The model the agent is given, and whether the gateway serves several: the one asked
    for (``--model`` with ``--config``, which must be served), else the first listed."""
    listed = _get(f"{root}/v1/models", key)
    data = listed.get("data") if isinstance(listed, dict) else None
    names = [str(m.get("id")) for m in data or () if isinstance(m, dict) and m.get("id")]
    if asked is not None and asked not in names:
        raise UsageError(f"the gateway serves no model named {asked!r}: {', '.join(names)}")
    return asked or (names[0] if names else "toolwire"), len(names) > 1


def _profile_path(agent: str, name: str | None) -> Path:
    """Where a named profile is kept (a throwaway one: where it would be made)."""
    if name is None:
        return Path(tempfile.gettempdir()) / f"toolwire-{agent}-…"
    if not name.replace("-", "").replace("_", "").isalnum() or len(name) > 64:
        raise UsageError("--profile NAME: letters, digits, - and _ (at most 64)")
    from ..store.db import home

    return home() / "launch" / agent / name


def _profile(agent: str, name: str | None) -> tuple[Path, bool]:
    """The profile's directory, made, and whether it is thrown away after the run."""
    if name is None:
        return Path(tempfile.mkdtemp(prefix=f"toolwire-{agent}-")), True
    where = _profile_path(agent, name)
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    return where, False


def _write(profile: Path, files: dict[str, str]) -> None:
    """The profile's files, readable by the user alone (they hold the gateway's key). A JSON
    file there already (the agent's own state, in a kept profile) keeps its other keys:
    only what launch sets is written over."""
    profile.chmod(0o700)
    for name, text in files.items():
        path = profile / name
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if name.endswith(".json") and path.exists():
            with suppress(ValueError, OSError):
                kept = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(kept, dict):
                    text = json.dumps(_merged(kept, json.loads(text)), indent=2) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)


def _merged(kept: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    out = dict(kept)
    for key, value in given.items():
        old = out.get(key)
        out[key] = (
            _merged(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
        )
    return out


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


def _checked(args: argparse.Namespace) -> None:
    """What the gateway cannot be started with: an upstream or Ollama with no model's name
    (the agent's own name would reach it)."""
    if args.upstream and not args.upstream_model:
        raise UsageError("--upstream needs --upstream-model NAME: the model at the upstream")
    if args.ollama is not None and not args.model:
        raise UsageError("--ollama needs --model NAME: the model Ollama serves")


def _stopped(signum: int, _: Any) -> None:
    raise SystemExit(128 + signum)  # so the gateway is stopped and the profile removed


def _cmd_launch(args: argparse.Namespace) -> int:
    _checked(args)
    rest = list(args.rest)
    key = args.api_key or os.environ.get("TOOLWIRE_API_KEY") or "toolwire"
    asked = args.model if args.config else None
    if args.show:
        root = (args.gateway or DEFAULT_GATEWAY).rstrip("/").removesuffix("/v1")
        profile = _profile_path(args.agent, args.profile)
        target = Target(root, key, asked or "toolwire", _context(args))
        setup = AGENTS[args.agent](target, profile)
        print(_shown(setup, args.program or setup.program, rest, profile))
        return 0
    program = _program(AGENTS[args.agent](Target("", key, "", 0), Path()), args.agent, args.program)
    profile, throwaway = _profile(args.agent, args.profile)
    previous = {s: signal.signal(s, _stopped) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with _gateway(args, profile / "gateway.log") as root:
            model, many = _served(root, key, asked)
            if args.agent == "codex" and many and model != CODEX_MODEL:
                raise UsageError(
                    f"Codex asks for {CODEX_MODEL} (its tools depend on a name it knows): "
                    f"serve one model for it, or name a model {CODEX_MODEL} in the config"
                )
            setup = AGENTS[args.agent](Target(root, key, model, _context(args), many), profile)
            _write(profile, dict(setup.files))
            env = {k: v for k, v in os.environ.items() if k not in setup.drop}
            env.update(setup.env)
            # Ctrl-C is the agent's (it may cancel a turn with it): launch waits for it to
            # end, then stops the gateway (a handler, not SIG_IGN, which the agent inherits)
            interrupt = signal.signal(signal.SIGINT, lambda *_: None)
            try:
                return subprocess.run([program, *setup.argv, *rest], env=env).returncode
            finally:
                signal.signal(signal.SIGINT, interrupt)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if throwaway:
            with suppress(OSError):
                shutil.rmtree(profile)


def add_launch(v: argparse.ArgumentParser) -> None:
    v.add_argument("agent", choices=sorted(AGENTS), help="the coding agent to start")
    v.add_argument("--model", help=f"{MODEL_HELP}; with --config, the served model to use")
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
