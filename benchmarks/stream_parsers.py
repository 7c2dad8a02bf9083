"""How the stream parsers scale: time per character, against one-shot and a naive re-parse.

For each family, and for the reader for tools in words, replies of about 1 KB, 10 KB, 100 KB
and 1 MB (many calls, long string arguments, text between them; for words, every form it
reads in turn: Hermes tags, a JSON fence, ``<function=NAME>{...}``, XML parameters, and code
fences that are not calls) are fed one character at a time and four at a time (about one
token). A family's calls are the sample calls it declares (``Family.samples``), so a family
added to the registry is measured here too. Printed per size: microseconds per character and
per chunk, the ratio to one one-shot parse of the same text, and the ratio to a naive reader
that re-parses the whole buffer at every chunk. The naive reader is quadratic, so its total
is estimated from timing it at 40 evenly spaced chunk positions (mean cost times the number
of chunks). Last, per reader, the total time at the largest size over the time at a tenth of
it (linear: about 10).

Targets: linear (per-character time at 1 MB within 1.5x of 10 KB, both chunk sizes; 1 MB
takes about 10x the time of 100 KB); at most 10 µs per 4-character chunk; at least 100x
faster than the naive reader at 100 KB. Figures are ratios measured in one run, never
assertions: these machines are shared.

    python benchmarks/stream_parsers.py [--sizes 1000,10000,100000,1000000] [--family NAME|words]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Mapping
from functools import partial

from toolwire import Family, family_names, get_family
from toolwire.formats.samples import SAMPLE_TOOLS, sample_arguments
from toolwire.formats.words import Words

TOOLS = SAMPLE_TOOLS


def _call(family: str, i: int) -> str:
    """Call ``i`` of a reply: the family's own declared sample (``Family.samples``)."""
    if family == "words":
        return _words_call(i, sample_arguments(i))
    return get_family(family).sample(i)


def _words_call(i: int, args: Mapping[str, object]) -> str:
    """The forms the reader for tools in words takes, in turn, after a code fence that is text."""
    call = {"name": "write_file", "arguments": args}
    fence = f"```python\nprint({i})\n```\n"
    form = i % 4
    if form == 0:
        return fence + "<tool_call>\n" + json.dumps(call) + "\n</tool_call>"
    if form == 1:
        return fence + "```json\n" + json.dumps(call) + "\n```"
    if form == 2:
        return fence + "<function=write_file>" + json.dumps(args) + "</function>"
    return fence + _call("qwen-xml", i)


def _family(name: str) -> Family:
    return Words() if name == "words" else get_family(name)


def make_reply(family: str, size: int) -> tuple[str, int]:
    parts: list[str] = []
    total = 0
    i = 0
    while total < size:
        if family == "llama3":
            piece = ("; " if parts else "") + _call(family, i)
        elif family == "pythonic":  # the whole reply is one list of calls (its bare form's)
            piece = (", " if parts else "[") + _call(family, 2 * i + 1)[1:-1]
        elif family == "xlam":  # its first form is the whole reply: prose and its tagged form
            piece = f"Now file {i}, as asked.\n" + _call(family, 2 * i + 1) + "\n"
        else:
            piece = f"Now file {i}, as asked.\n" + _call(family, i) + "\n"
        parts.append(piece)
        total += len(piece)
        i += 1
    if family == "pythonic":
        parts.append("]")
    return "".join(parts), i


def _stream(family: str, text: str, chunk: int) -> tuple[float, int]:
    fam = _family(family)
    s = fam.stream(TOOLS)
    calls = 0
    t0 = time.perf_counter()
    feed = s.feed
    for start in range(0, len(text), chunk):
        feed(text[start : start + chunk])
    events = s.finish()
    elapsed = time.perf_counter() - t0
    calls = sum(1 for e in events if type(e).__name__ == "CallEnd")
    return elapsed, calls


def _streamed(family: str, text: str, chunk: int) -> float:
    return _stream(family, text, chunk)[0]


def _best(fn: Callable[[], float], runs: int) -> float:
    return min(fn() for _ in range(runs))


def bench(family: str, sizes: list[int]) -> None:
    fam = _family(family)
    print(f"\n{family}")
    print(
        f"{'size':>9} {'calls':>6} {'chunk':>5} {'µs/char':>8} {'µs/chunk':>9} "
        f"{'x one-shot':>10} {'naive/stream':>13}"
    )
    per_char: dict[tuple[int, int], float] = {}
    totals: dict[tuple[int, int], float] = {}
    lengths: dict[int, int] = {}
    for size in sizes:
        text, ncalls = make_reply(family, size)
        lengths[size] = len(text)
        runs = 5 if size <= 100_000 else 2

        def one_shot(text: str = text, ncalls: int = ncalls) -> float:
            t0 = time.perf_counter()
            result = fam.parse(text, TOOLS)
            assert len(result.calls) == ncalls, (family, len(result.calls), ncalls)
            return time.perf_counter() - t0

        whole = _best(one_shot, runs)
        for chunk in (1, 4):
            elapsed = _best(partial(_streamed, family, text, chunk), runs)
            n_chunks = -(-len(text) // chunk)
            naive = ""
            if size <= 100_000:
                positions = [max(1, (k * n_chunks) // 40) for k in range(1, 41)]
                t0 = time.perf_counter()
                for p in positions:
                    fam.parse(text[: p * chunk], TOOLS)
                mean = (time.perf_counter() - t0) / len(positions)
                naive = f"{mean * n_chunks / elapsed:12.0f}x"
            per_char[(size, chunk)] = elapsed / len(text)
            totals[(size, chunk)] = elapsed
            print(
                f"{len(text):>9} {ncalls:>6} {chunk:>5} {elapsed / len(text) * 1e6:8.3f} "
                f"{elapsed / n_chunks * 1e6:9.2f} {elapsed / whole:10.2f} {naive:>13}"
            )
    big, small = max(sizes), 10_000
    if small in sizes and big != small:
        for chunk in (1, 4):
            ratio = per_char[(big, chunk)] / per_char[(small, chunk)]
            print(f"  linearity, chunk {chunk}: µs/char at {big} / at {small} = {ratio:.2f}")
    tenth = big // 10
    if tenth in sizes:
        for chunk in (1, 4):
            ratio = totals[(big, chunk)] / totals[(tenth, chunk)]
            more = lengths[big] / lengths[tenth]
            print(
                f"  scaling, chunk {chunk}: time at {big} / at {tenth} = {ratio:.1f}"
                f" for {more:.1f}x the text (linear: the same)"
            )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000,100000,1000000")
    p.add_argument("--family", action="append")
    args = p.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    for family in args.family or [*family_names(), "words"]:
        bench(family, sizes)


if __name__ == "__main__":
    main()
