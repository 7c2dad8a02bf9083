"""How the stream parsers scale: time per character, against one-shot and a naive re-parse.

For each family, and for the reader for tools in words, replies of about 1 KB, 10 KB, 100 KB
and 1 MB (many calls, long string arguments, text between them; for words, every form it
reads in turn: Hermes tags, a JSON fence, ``<function=NAME>{...}``, XML parameters, and code
fences that are not calls) are fed one character at a time and four at a time (about one
token). Printed per size: microseconds per character and per chunk, the ratio to one one-shot
parse of the same text, and the ratio to a naive reader that re-parses the whole buffer at
every chunk. The naive reader is quadratic, so its total is estimated from timing it at 40
evenly spaced chunk positions (mean cost times the number of chunks). Last, per reader, the
total time at the largest size over the time at a tenth of it (linear: about 10).

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
from collections.abc import Callable
from functools import partial

from toolwire import Family, family_names, get_family
from toolwire.formats.words import Words

TOOLS = [
    {
        "name": "write_file",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "content": {"type": "string"},
                "mode": {"type": "integer"},
            },
        },
    }
]

_LINE = 'for i in range(10):  # a "quoted" word, a tab\there, and some unicode: héllo → ok\n'


def _content(i: int) -> str:
    return _LINE * (3 + (i * 7) % 20)


#: The families that write a JSON list of calls: the text around the list.
_LISTS = {
    "granite": ("<|tool_call|>", ""),
    "nemotron-v2": ("<TOOLCALL>", "</TOOLCALL>"),
    "apriel": ("<tool_calls>", "</tool_calls>"),
    "apertus": ("<|tools_prefix|>", "<|tools_suffix|>"),
    "firefunction": (" functools", ""),
    "command-r7b": ("<|START_ACTION|>", "<|END_ACTION|>"),
}


def _list_item(family: str, args: dict[str, object]) -> dict[str, object]:
    if family == "apertus":
        return {"write_file": args}
    if family == "command-r7b":
        return {"tool_call_id": "0", "tool_name": "write_file", "parameters": args}
    return {"name": "write_file", "arguments": args}


def _call(family: str, i: int) -> str:
    args = {"path": f"src/file_{i}.py", "content": _content(i), "mode": 420}
    if family in _LISTS:
        opening, closing = _LISTS[family]
        return opening + json.dumps([_list_item(family, args)]) + closing
    if family == "hermes":
        body = json.dumps({"name": "write_file", "arguments": args})
        return "<tool_call>\n" + body + "\n</tool_call>"
    if family == "qwen-xml":
        return (
            "<tool_call>\n<function=write_file>\n"
            + "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
            + "</function>\n</tool_call>"
        )
    if family == "llama3":
        return json.dumps({"name": "write_file", "parameters": args})
    if family == "glm":
        return (
            "<tool_call>write_file\n"
            + "".join(
                f"<arg_key>{k}</arg_key>\n<arg_value>{_as_text(v)}</arg_value>\n"
                for k, v in args.items()
            )
            + "</tool_call>"
        )
    if family == "kimi-k2":
        return (
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.write_file:0"
            "<|tool_call_argument_begin|>" + json.dumps(args) + "<|tool_call_end|>"
            "<|tool_calls_section_end|>"
        )
    if family == "minimax":
        return (
            '<minimax:tool_call>\n<invoke name="write_file">\n'
            + "".join(f'<parameter name="{k}">{_as_text(v)}</parameter>\n' for k, v in args.items())
            + "</invoke>\n</minimax:tool_call>"
        )
    if family in ("seed-oss", "minicpm5", "minimax-m3"):
        return _xml_more_call(family, args)
    if family == "words":
        return _words_call(i, args)
    if family in ("lfm2", "pythonic", "gemma4"):
        return _literal_call(family, args)
    if family in ("gpt-oss", "glimmer", "kimi-k3"):
        return _channel_call(family, args)
    if family in ("deepseek-r1", "deepseek-v3.1", "deepseek-dsml"):
        return _deepseek_call(family, args)
    if family in _NAMED_JSON:
        return _named_json_call(family, i, args)
    if family == "inkling":
        return _inkling_call(args)
    if family == "hunyuan":
        return (
            "<tool_calls>\n<tool_call>write_file<tool_sep>\n"
            + "".join(
                f"<arg_key>{k}</arg_key>\n<arg_value>{_as_text(v)}</arg_value>\n"
                for k, v in args.items()
            )
            + "</tool_call>\n</tool_calls>"
        )
    if i % 2:
        return "[TOOL_CALLS]write_file[ARGS]" + json.dumps(args)
    items = [{"name": "write_file", "arguments": args, "id": "a1b2c3d4e"}]
    return "[TOOL_CALLS]" + json.dumps(items)


#: Families that write the name or role outside one JSON object (or list) of the call.
_NAMED_JSON = (
    "functionary-v3.1",
    "functionary-v3.2",
    "gigachat",
    "command-r-plus",
    "minimax-m1",
    "solar-open",
)


def _named_json_call(family: str, i: int, args: dict[str, object]) -> str:
    body = json.dumps(args)
    call = json.dumps({"name": "write_file", "arguments": args})
    if family == "functionary-v3.1":
        return "<function=write_file>" + body + "</function>"
    if family == "functionary-v3.2":
        return ">>>write_file\n" + body
    if family == "gigachat":
        if i % 2:
            return "<|function_call|>" + call
        return "<|message_sep|>\n\nfunction call<|role_sep|>\n" + call + "<|message_sep|>\n\n"
    if family == "command-r-plus":
        item = {"tool_name": "write_file", "parameters": args}
        return "Action:\n```json\n" + json.dumps([item]) + "\n```"
    if family == "minimax-m1":
        return "<tool_calls>\n" + call + "\n</tool_calls>"
    return (
        f"<|tool_calls|><|tool_call:begin|>call{i}<|tool_call:name|>write_file"
        f"<|tool_call:args|>{body}<|tool_call:end|><|calls|>"
    )


def _deepseek_call(family: str, args: dict[str, object]) -> str:
    if family == "deepseek-dsml":
        params = "".join(
            f'<｜DSML｜parameter name="{k}" string="{kind}">{text}</｜DSML｜parameter>\n'
            for k, v in args.items()
            for kind, text in [("true", v) if isinstance(v, str) else ("false", json.dumps(v))]
        )
        return (
            '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="write_file">\n'
            + params
            + "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
        )
    if family == "deepseek-r1":
        call = "function<｜tool▁sep｜>write_file\n```json\n" + json.dumps(args) + "\n```"
    else:
        call = "write_file<｜tool▁sep｜>" + json.dumps(args)
    return (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
        + call
        + "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    )


def _xml_more_call(family: str, args: dict[str, object]) -> str:
    """Seed-OSS, MiniCPM5 and MiniMax M3 (every tag after MiniMax's namespace token)."""
    if family == "seed-oss":
        params = "".join(f"<parameter={k}>{_as_text(v)}</parameter>\n" for k, v in args.items())
        return f"<seed:tool_call>\n<function=write_file>\n{params}</function>\n</seed:tool_call>"
    if family == "minicpm5":
        params = "".join(
            f'<param name="{k}"><![CDATA[{v}]]></param>'
            if isinstance(v, str) and "\n" in v
            else f'<param name="{k}">{_as_text(v)}</param>'
            for k, v in args.items()
        )
        return f'<function name="write_file">{params}</function>'
    ns = "]<]minimax[>["
    params = "".join(f"{ns}<{k}>{_as_text(v)}{ns}</{k}>" for k, v in args.items())
    return f'{ns}<tool_call>\n{ns}<invoke name="write_file">{params}{ns}</invoke>\n{ns}</tool_call>'


def _literal_call(family: str, args: dict[str, object]) -> str:
    """A call written with literal arguments: Python's (LFM2, the bare list) or Gemma 4's."""
    if family == "gemma4":
        inner = ",".join(
            f'{k}:<|"|>{v}<|"|>' if isinstance(v, str) else f"{k}:{json.dumps(v)}"
            for k, v in args.items()
        )
        return "<|tool_call>call:write_file{" + inner + "}<tool_call|>"
    call = "write_file(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
    if family == "lfm2":
        return "<|tool_call_start|>[" + call + "]<|tool_call_end|>"
    return "[" + call + "]"


def _channel_call(family: str, args: dict[str, object]) -> str:
    """A call as the grammars of messages on channels write it, after some reasoning."""
    if family == "gpt-oss":
        return (
            "<|channel|>analysis<|message|>Writing it.<|end|><|start|>assistant<|channel|>"
            "commentary to=functions.write_file <|constrain|>json<|message|>"
            + json.dumps(args)
            + "<|call|>"
        )
    if family == "glimmer":
        return (
            "<|start|>assistant to=self<|message|>Writing it.<|eom|>"
            "<|start|>assistant to=write_file<|message|><atem:function_calls>\n"
            '<atem:invoke name="write_file">\n'
            + "".join(
                f'<atem:parameter name="{k}">{_as_text(v)}</atem:parameter>\n'
                for k, v in args.items()
            )
            + "</atem:invoke>\n</atem:function_calls><|eom|>"
        )
    arguments = "".join(
        f'<|open|>argument key="{k}" type="{"string" if isinstance(v, str) else "number"}"'
        f"<|sep|>{_as_text(v)}<|close|>argument<|sep|>"
        for k, v in args.items()
    )
    return (
        "<|open|>think<|sep|>Writing it.<|close|>think<|sep|><|open|>tools<|sep|>"
        '<|open|>call tool="write_file" index="1"<|sep|>'
        + arguments
        + "<|close|>call<|sep|><|close|>tools<|sep|>"
    )


def _inkling_call(args: dict[str, object]) -> str:
    """Inkling's typed blocks: some thinking, then the call's block, its author the tool."""
    call = json.dumps({"name": "write_file", "args": args}, separators=(",", ":"))
    return (
        "<|message_model|><|content_thinking|>Writing it.<|end_message|>"
        "<|message_model|>write_file<|content_invoke_tool_json|>" + call + "<|end_message|>"
    )


def _as_text(value: object) -> str:
    """A value as the XML-like templates write it: strings verbatim, others as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _words_call(i: int, args: dict[str, object]) -> str:
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
        elif family == "pythonic":  # the whole reply is one list of calls
            piece = (", " if parts else "[") + _call(family, i)[1:-1]
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
