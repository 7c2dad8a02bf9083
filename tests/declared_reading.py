"""How a family reads its corpus: the record a declared family must match.

Used by ``tests/test_declared.py``, and run as a script to record what a tree's registered
readers read (``tests/fixtures/declared_golden.json``)::

    PYTHONPATH=OLD_TREE/src python tests/declared_reading.py FAMILY [FAMILY ...]

The record of a family was made from its hand-written reader, before its declaration
replaced it: each development corpus case of the family (the llama.cpp, vLLM and SGLang
development cases; the held-out set is not read) and each near miss, read whole (strict and
not: the text, the reasoning, the calls, how many notices) and streamed at several chunkings
(the events, adjacent pieces of one text joined; a notice by its code, a call's abort
without its reason: words may differ, what was read may not).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

from toolwire import events as ev
from toolwire import get_family
from toolwire.formats.base import Family, ParseResult
from toolwire.formats.reasoning import opens_reasoning

try:
    from .declared_near import NEAR, NEAR_TOOLS
except ImportError:  # run as a script, from tests/
    from declared_near import NEAR, NEAR_TOOLS  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "fixtures" / "declared_golden.json"
#: The chunk sizes a reply is streamed in (and whole).
SIZES = (1, 3, 7)


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench = _load(ROOT / "benchmarks" / "peer_cases.py", "peer_cases_declared")

TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("get_weather", "get_time", "search")
]


def cases(family: str) -> list[tuple[str, str, list[dict[str, Any]], bool]]:
    """Every development case of ``family``: (id, reply, tools, reasoning opened)."""
    out = []
    for corpus in ("llama_cpp_cases.json", "vllm_cases.json", "sglang_cases.json"):
        doc = bench.load(corpus)
        for case in doc["cases"]:
            try:
                if bench.family_of(case) != family:
                    continue
            except KeyError:
                continue
            tools = [{"type": "function", "function": doc["tools"][k]} for k in case["tools"]]
            opened = opens_reasoning(case.get("thinking_opener") or "")
            out.append((f"{corpus.split('_')[0]}:{case['id']}", case["input"], tools, opened))
    near_tools = TOOLS + [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
        for n in NEAR_TOOLS.get(family, ())
    ]
    for i, reply in enumerate(NEAR.get(family, [])):
        out.append((f"near:{i}", reply, near_tools, False))
    return out


def _whole(result: ParseResult) -> list[Any]:
    calls = [[c.name, c.arguments, c.arguments_text, c.text_values] for c in result.calls]
    return [result.content, result.reasoning, calls, len(result.notices)]


def _events(family: Family, reply: str, tools: Any, opened: bool, size: int) -> list[Any]:
    stream = family.stream(tools, reasoning_open=opened, make_id=lambda i: f"call_{i}")
    events = []
    for start in range(0, len(reply), size):
        events.extend(stream.feed(reply[start : start + size]))
    joined: list[Any] = []
    for event in events + stream.finish():
        last = joined[-1] if joined else None
        if isinstance(event, _PIECES) and type(last) is type(event) and _same_call(last, event):
            joined[-1] = replace(last, text=last.text + event.text)
        else:
            joined.append(event)
    return [_plain(e) for e in joined]


_PIECES = (ev.TextDelta, ev.ReasoningDelta, ev.CallArgsDelta)


def _same_call(a: Any, b: Any) -> bool:
    return getattr(a, "index", None) == getattr(b, "index", None)


def _plain(event: Any) -> list[Any]:
    if isinstance(event, ev.Notice):
        return ["Notice", event.code]
    if isinstance(event, ev.CallAbort):
        return ["CallAbort", event.index, event.id]
    return [type(event).__name__, dataclasses.asdict(event)]


def reading(family: Family, reply: str, tools: Any, opened: bool) -> dict[str, Any]:
    """How ``family`` reads ``reply`` (see the module's doc), as plain JSON data."""
    out = {
        "lenient": _whole(family.parse(reply, tools, reasoning_open=opened)),
        "strict": _whole(family.parse(reply, tools, reasoning_open=opened, strict=True)),
        "events": {
            str(size): _events(family, reply, tools, opened, size)
            for size in (*SIZES, len(reply) or 1)
        },
    }
    plain: dict[str, Any] = json.loads(json.dumps(out))  # as it reads back from the record
    return plain


def main(names: list[str]) -> None:
    record = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    for name in names:
        family = get_family(name)
        record[name] = {
            cid: reading(family, reply, tools, opened) for cid, reply, tools, opened in cases(name)
        }
        print(f"{name}: {len(record[name])} cases recorded from {type(family).__module__}")
    GOLDEN.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
