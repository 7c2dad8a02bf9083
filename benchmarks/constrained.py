"""What a grammar costs the local model: time per token, constrained against free.

On the default model (or ``--model PATH``), at temperature 0, rounds interleaved so both
sides share the machine's noise: a call generated free (the weather question with
``tool_choice`` required, asked only by the prompt) and the same question constrained from
the first token; and a plain answer (no call) with the call triggers watched and without.
Printed: milliseconds per token after the first for each side and their ratio (goal: at
most 1.02), and the time to the first token of the plain answer both ways (goal: at most
1.02). Then what one whole-vocabulary mask costs each engine at the start of the call's
grammar: llguidance (the engine toolwire uses) and llama.cpp's own grammar sampler (for
comparison; published figures: about 0.05 ms and 14.5 ms), and how many masks the
constrained call needed per token (most tokens are checked alone, without a mask). The
prompt cache is emptied before every run. Figures are ratios from one run, never
assertions: these machines are shared. The wall-clock ratios need an idle machine (another
process's load lands on one side or the other); the grammar's own cost, timed inside the
generation around the grammar's checks, masks and choices alone, does not.

    python benchmarks/constrained.py [--model PATH] [--rounds 5]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import threading
import time
from dataclasses import replace
from typing import Any

from toolwire.backends.constrain import GrammarSampler
from toolwire.backends.generate import Generation
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
) -> tuple[float, float, int, Generation]:
    """(seconds to the first token, seconds per token after it, tokens, the generation) for
    one reply."""
    plan, sent, _ = plan_turn(backend, replace(request, constrained=constrained))
    prepared = backend.prepare(sent, plan)
    stamps: list[float] = []

    def put(item: Any) -> None:
        if isinstance(item, str):
            stamps.append(time.perf_counter())

    backend.llama.reset()
    start = time.perf_counter()
    generation = backend.generation(prepared, put=put, stop=threading.Event(), max_tokens=60)
    generation.run()
    first = stamps[0] - start
    per = (stamps[-1] - stamps[0]) / max(1, len(stamps) - 1)
    return first, per, len(stamps), generation


def masks(backend: LlamaCppBackend, request: Request, free: float, repeat: int = 20) -> None:
    """What the grammar itself costs: per whole-vocabulary mask, each engine, where the
    required call begins; and over one constrained call, the masks it needed and the time
    the grammar took per token (checks, masks and choices), against a free token's time."""
    plan, _, _ = plan_turn(backend, replace(request, constrained=True))
    assert plan.constraint is not None
    grammar = plan.constraint.grammar("required")
    vocabulary = backend.vocabulary
    assert vocabulary is not None
    sampler = GrammarSampler(vocabulary, grammar)
    for _ in range(repeat):
        sampler.allowed()
    ours = sampler.mask_seconds / sampler.masks
    theirs = _llama_cpp_mask(backend, grammar, max(3, repeat // 5))
    print(
        f"  one mask of {vocabulary.n_vocab} tokens:   llguidance {ours * 1e3:.3f} ms   "
        f"llama.cpp grammar {theirs * 1e3:.2f} ms   "
        f"(vocabulary built once in {vocabulary.build_seconds:.2f} s)"
    )
    generation = timed(backend, request, constrained=True)[3]
    count = max(1, len(generation.written))
    own = generation.grammar_seconds / count
    print(
        f"  the grammar's own cost:    {own * 1e3:.3f} ms per token "
        f"({(free + own) / free:.3f}x a free token), {generation.masks} masks "
        f"in {len(generation.written)} tokens (the others kept the free choice)"
    )


def _llama_cpp_mask(backend: LlamaCppBackend, grammar: str, repeat: int) -> float:
    """Seconds per whole-vocabulary mask of llama.cpp's own grammar sampler."""
    import llama_cpp
    import numpy as np

    vocab = backend.llama._model.vocab
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    n = int(backend.llama.n_vocab())
    data = np.zeros(n, dtype=np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)]))
    try:
        spent = 0.0
        for _ in range(repeat):
            data["id"] = np.arange(n, dtype=np.int32)
            data["logit"] = 0.0
            array = llama_cpp.llama_token_data_array(
                data=data.ctypes.data_as(llama_cpp.llama_token_data_p),
                size=n,
                selected=-1,
                sorted=False,
            )
            started = time.perf_counter()
            llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
            spent += time.perf_counter() - started
        return spent / repeat
    finally:
        llama_cpp.llama_sampler_free(sampler)


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
    timed(backend, call, constrained=True)  # the vocabulary built, once per model: apart
    for _ in range(args.rounds):
        for side, constrained in (("free", False), ("constrained", True)):
            _, seconds, _, _ = timed(backend, call, constrained=constrained)
            per[side].append(seconds)
            ttft, _, _, _ = timed(backend, plain, constrained=constrained)
            first[side].append(ttft)
    free, held = statistics.median(per["free"]), statistics.median(per["constrained"])
    a, b = statistics.median(first["free"]), statistics.median(first["constrained"])
    print(f"model: {backend.model}, {args.rounds} interleaved rounds, medians")
    row = "  {:<26} free {:7.1f} ms   {:<11} {:7.1f} ms   ratio {:.3f}x (goal {})"
    print(
        row.format(
            "time per token, a call:",
            free * 1e3,
            "constrained",
            held * 1e3,
            held / free,
            "<= 1.02x",
        )
    )
    print(row.format("first token, plain reply:", a * 1e3, "watched", b * 1e3, b / a, "<= 1.02x"))
    masks(backend, call, free)


if __name__ == "__main__":
    main()
