"""What a grammar costs the local model: time per token, constrained against free.

On the default model (or ``--model PATH``), at temperature 0, rounds interleaved so both
sides share the machine's noise: a call generated free (the weather question with
``tool_choice`` required, asked only by the prompt) and the same question constrained from
the first token; and a plain answer (no call) with the call triggers watched and without.
Printed: milliseconds per token after the first for each side and their ratio (target: at
most 1.3), and the time to the first token of the plain answer both ways (target: the
same). The prompt cache is emptied before every run. Figures are ratios from one run, never
assertions: these machines are shared.

    python benchmarks/constrained.py [--model PATH] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from dataclasses import replace
from typing import Any

from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.models import default_model_path
from toolwire.pipeline import Request, plan_turn

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


def timed(
    backend: LlamaCppBackend, request: Request, *, constrained: bool
) -> tuple[float, float, int]:
    """(seconds to the first token, seconds per token after it, tokens) for one reply."""
    plan, sent, _ = plan_turn(backend, replace(request, constrained=constrained))
    prepared = backend.prepare(sent, plan)
    stamps: list[float] = []

    def put(item: Any) -> None:
        if isinstance(item, str):
            stamps.append(time.perf_counter())

    backend.llama.reset()
    start = time.perf_counter()
    backend.generation(prepared, put=put, stop=threading.Event(), max_tokens=60).run()
    first = stamps[0] - start
    per = (stamps[-1] - stamps[0]) / max(1, len(stamps) - 1)
    return first, per, len(stamps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a GGUF file (default: the default model)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    backend = LlamaCppBackend(args.model or default_model_path(), n_ctx=2048, n_threads=2)
    call = Request(
        [{"role": "user", "content": "What's the weather in Paris for 3 days?"}],
        [WEATHER],
        tool_choice="required",
    )
    plain = Request([{"role": "user", "content": "Tell me a short joke about cats."}], [WEATHER])
    per: dict[str, list[float]] = {"free": [], "constrained": []}
    first: dict[str, list[float]] = {"free": [], "constrained": []}
    for _ in range(args.rounds):
        for side, constrained in (("free", False), ("constrained", True)):
            _, seconds, _ = timed(backend, call, constrained=constrained)
            per[side].append(seconds)
            ttft, _, _ = timed(backend, plain, constrained=constrained)
            first[side].append(ttft)
    free, held = statistics.median(per["free"]), statistics.median(per["constrained"])
    a, b = statistics.median(first["free"]), statistics.median(first["constrained"])
    print(f"model: {backend.model}, {args.rounds} interleaved rounds, medians")
    row = "  {:<26} free {:7.1f} ms   {:<11} {:7.1f} ms   ratio {:.2f}x (target {})"
    print(
        row.format(
            "time per token, a call:", free * 1e3, "constrained", held * 1e3, held / free, "<= 1.3x"
        )
    )
    print(row.format("first token, plain reply:", a * 1e3, "watched", b * 1e3, b / a, "~1.0x"))


if __name__ == "__main__":
    main()
