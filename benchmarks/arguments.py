"""The argument reader against json-repair, and on valid JSON against json.loads.

Reads benchmarks/argument_corpus.json (made by make_argument_corpus.py: each case's expected
result comes from how it was built). For each case, toolwire's pipeline and json-repair
(given the same unwrapping of a JSON string or an {"arguments": …} envelope, so only the
readers differ) either return arguments or refuse. A case is correct when the arguments
equal the expected ones, or when a refusal was expected and it refused; any other value is
counted as invented. Typed cases (a schema asks for numbers, booleans, lists) are reported
apart: json-repair does not type by schema, so there it is shown for reference only.

Times are per case (best of several rounds in one run): repairs against json-repair, and
valid JSON through the reader against json.loads. Needs `pip install json-repair`.

    python benchmarks/arguments.py
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import json_repair

from toolwire.arguments import prepare_arguments, read_json
from toolwire.errors import ArgumentsError

OPEN = {"type": "object"}
# Valid JSON, whatever the pipeline unwraps afterwards: no reader repairs these.
_NOT_REPAIRS = ("valid", "valid-indented", "envelope", "string-encoded")
REFUSED = object()


def tool_schema(case: dict[str, Any]) -> dict[str, Any]:
    """A tool that takes the expected fields, any values: what a real tool declares."""
    if isinstance(case["expect"], dict):
        return {"type": "object", "properties": {k: {} for k in case["expect"]}}
    return OPEN


def ours(text: str, schema: dict[str, Any]) -> Any:
    try:
        return prepare_arguments(text, schema).arguments
    except ArgumentsError:
        return REFUSED


def our_reader(text: str, schema: dict[str, Any]) -> Any:
    """The reader alone, with the same unwrapping json-repair gets: readers side by side."""
    del schema
    try:
        value = read_json(text).value
        if isinstance(value, str) and value.lstrip().startswith("{"):
            value = read_json(value).value
    except ArgumentsError:
        return REFUSED
    if (
        isinstance(value, dict)
        and set(value) == {"arguments"}
        and isinstance(value["arguments"], dict)
    ):
        value = value["arguments"]
    if not isinstance(value, dict) or not value:
        return REFUSED
    return value


def theirs(text: str, schema: dict[str, Any]) -> Any:
    del schema
    try:
        value = json_repair.loads(text)
        if isinstance(value, str) and value.lstrip().startswith("{"):
            value = json_repair.loads(value)
        if (
            isinstance(value, dict)
            and set(value) == {"arguments"}
            and isinstance(value["arguments"], dict)
        ):
            value = value["arguments"]
    except Exception:
        return REFUSED
    if not isinstance(value, dict) or not value:
        return REFUSED
    return value


def outcome(result: Any, case: dict[str, Any]) -> str:
    if result is REFUSED:
        return "correct" if case["refuse"] else "refused"
    if not case["refuse"] and result == case["expect"]:
        return "correct"
    return "invented"


def per_case_seconds(fn: Callable[[], Any], rounds: int = 5, repeat: int = 20) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - t0) / repeat)
    return best


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def ratios_by_case(times: dict[str, list[float]], label: str) -> list[float]:
    return [t / o for t, o in zip(times["json-repair"], times[label], strict=True)]


def main() -> None:
    data = json.loads(Path(__file__).with_name("argument_corpus.json").read_text())
    schemas = data["schemas"]
    cases = data["cases"]
    groups = {
        "reading": [c for c in cases if "schema" not in c],
        "typed": [c for c in cases if "schema" in c],
    }
    print(f"corpus: {len(cases)} cases (version {data['version']})")
    for group, members in groups.items():
        print(f"\n{group} ({len(members)} cases)")
        print(f"{'reader':<12} {'correct':>8} {'refused':>8} {'invented':>9} {'µs/case':>8}")
        times: dict[str, list[float]] = {}
        for label, fn in (
            ("toolwire", ours),
            ("reader only", our_reader),
            ("json-repair", theirs),
        ):
            counts = {"correct": 0, "refused": 0, "invented": 0}
            failures = []
            times[label] = []
            for case in members:
                schema = schemas[case["schema"]] if "schema" in case else tool_schema(case)
                result = fn(case["text"], schema)
                kind = outcome(result, case)
                counts[kind] += 1
                if kind != "correct":
                    failures.append((case["slip"], case["text"][:50]))
                if case["slip"] not in _NOT_REPAIRS:
                    times[label].append(
                        per_case_seconds(
                            lambda f=fn, c=case, s=schema: f(c["text"], s), rounds=3, repeat=5
                        )
                    )
            n = len(members)
            mean = sum(times[label]) / max(1, len(times[label]))
            print(
                f"{label:<12} {counts['correct'] / n:8.1%} {counts['refused']:8d} "
                f"{counts['invented']:9d} {mean * 1e6:8.1f}"
            )
            if label == "toolwire" and failures:
                for slip, text in failures[:10]:
                    print(f"    not correct: {slip}: {text!r}")
        repairs = [c for c in members if c["slip"] not in _NOT_REPAIRS]
        if group == "typed":
            print("  (json-repair does not type by schema: its times here are not comparable)")
            continue
        for label in ("toolwire", "reader only"):
            ratios = sorted(t / o for t, o in zip(times["json-repair"], times[label], strict=True))
            total = sum(times["json-repair"]) / sum(times[label])
            short = [
                r
                for r, c in zip(ratios_by_case(times, label), repairs, strict=True)
                if len(c["text"]) < 300
            ]
            long = [
                r
                for r, c in zip(ratios_by_case(times, label), repairs, strict=True)
                if len(c["text"]) >= 300
            ]
            print(
                f"  json-repair / {label}, repairs: {total:.1f}x in total time, "
                f"median per case {ratios[len(ratios) // 2]:.1f}x"
                + (f"; short texts {median(short):.1f}x ({len(short)})" if short else "")
                + (f", long texts {median(long):.1f}x ({len(long)})" if long else "")
            )

    valid = [c["text"] for c in cases if c["slip"] in ("valid", "valid-indented")]
    t_loads = sum(per_case_seconds(lambda t=t: json.loads(t), repeat=200) for t in valid)
    t_read = sum(per_case_seconds(lambda t=t: read_json(t), repeat=200) for t in valid)
    t_prep = sum(
        per_case_seconds(lambda t=t: prepare_arguments(t, OPEN), repeat=200) for t in valid
    )
    print(
        f"\nvalid JSON ({len(valid)} texts): read_json / json.loads = {t_read / t_loads:.2f}x; "
        f"whole pipeline (open schema) / json.loads = {t_prep / t_loads:.2f}x"
    )


if __name__ == "__main__":
    main()
