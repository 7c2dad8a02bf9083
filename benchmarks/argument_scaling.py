"""How the argument pipeline scales: time at 10x and 100x the input, as ratios.

Hostile or broken argument texts at about 10 KB, 100 KB and 1 MB go through the reader,
and many problems through the explanation; linear work shows as about 10x per step. The
last table shows why values checked against a schema that recurses through a union are
bounded in depth: jsonschema's own work grows exponentially with it.

    python benchmarks/argument_scaling.py
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

from toolwire.arguments import prepare_arguments, read_json
from toolwire.errors import ArgumentsError


def seconds(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    with contextlib.suppress(ArgumentsError):
        run()
    return time.perf_counter() - start


def joined(n: int) -> str:
    return "".join(f'{{"k{i}": {i}}}' for i in range(n))


def trailing(n: int) -> str:
    return "{" + ", ".join(f"k{i}: 'v{i}'" for i in range(n)) + ",}"


def unclosed(n: int) -> str:
    return '{"content": "' + "x\\\\y " * n


def opens(n: int) -> str:
    return "[" * min(n, 99) + "1," * n


def comments(n: int) -> str:
    return "{" + "".join(f"/* c{i} */ 'k{i}': {i}, # note\n" for i in range(n)) + "}"


CASES: dict[str, Callable[[int], str]] = {
    "run-together objects": joined,
    "bare keys, single quotes, trailing commas": trailing,
    "an unclosed string of escapes": unclosed,
    "deep brackets then a long list": opens,
    "comments of every kind": comments,
}


def main() -> None:
    print(f"{'input':<44} {'~10 KB':>9} {'x100 KB':>9} {'x1 MB':>9}")
    for label, make in CASES.items():
        times = []
        for size in (10_000, 100_000, 1_000_000):
            n = max(1, size // max(1, len(make(10)) // 10))
            text = make(n)[:size]
            times.append(seconds(lambda t=text: read_json(t)))
        print(
            f"{label:<44} {times[0] * 1e3:7.1f}ms {times[1] / times[0]:8.1f}x "
            f"{times[2] / times[0]:8.1f}x"
        )
    schema = {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
    }
    times = []
    for n in (1_000, 10_000, 100_000):
        raw = json.dumps({"tags": list(range(n))})
        times.append(seconds(lambda r=raw: prepare_arguments(r, schema)))
    print(
        f"{'problems explained (1k, 10k, 100k)':<44} {times[0] * 1e3:7.1f}ms "
        f"{times[1] / times[0]:8.1f}x {times[2] / times[0]:8.1f}x"
    )
    print("\nA schema recursing through oneOf, one bad leaf, nesting 2·depth + 1:")
    ui: dict[str, Any] = {
        "type": "object",
        "$defs": {
            "c": {"oneOf": [{"$ref": "#/$defs/box"}, {"$ref": "#/$defs/t"}]},
            "box": {
                "type": "object",
                "properties": {
                    "type": {"const": "box"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/c"}},
                },
                "required": ["type", "children"],
                "additionalProperties": False,
            },
            "t": {
                "type": "object",
                "properties": {"type": {"const": "text"}, "size": {"type": "integer"}},
                "required": ["type"],
                "additionalProperties": False,
            },
        },
        "properties": {"root": {"$ref": "#/$defs/c"}},
    }
    for depth in (1, 2, 3, 4):
        node: Any = {"type": "text", "size": "big"}
        for _ in range(depth):
            node = {"type": "box", "children": [node]}
        raw = json.dumps({"root": node})
        print(f"  depth {depth}: {seconds(lambda r=raw: prepare_arguments(r, ui)) * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
