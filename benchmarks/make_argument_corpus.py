"""Write benchmarks/argument_corpus.json: argument texts with the slips small models make.

Each case is built from a known value by applying a known slip to its text, so its expected
result comes from the construction, never from running a reader. Run it again after editing
the bases or slips; the file it writes is what benchmarks/arguments.py measures.

    python benchmarks/make_argument_corpus.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_CODE = "".join(
    f'def step_{i}(rows, limit={i}):\n    """Keep rows under {i}; say "why" in the log."""\n'
    f"    kept = [r for r in rows if r['n'] < limit]\n"
    f"\tprint(f'step {i}: {{len(kept)}} kept')\n    return kept\n\n"
    for i in range(12)
)
_LETTER = (
    'Hi all,\n\nHere are the notes from Thursday. Revenue is up 4% (see "Q3 summary"), '
    "costs are flat, and the café project is on hold until March.\n\n"
) * 6 + "Thanks,\nAna"
_SQL = (
    "SELECT c.name, SUM(o.total) AS spent, COUNT(*) AS orders FROM customers c "
    "JOIN orders o ON o.customer_id = c.id WHERE o.created_at >= '2024-01-01' "
    "AND c.region IN ('north', 'east') GROUP BY c.name HAVING SUM(o.total) > 1000 "
    "ORDER BY spent DESC LIMIT 50"
) * 3

BASES: list[dict[str, Any]] = [
    {"city": "Paris", "days": 3},
    {"query": "invoices 2024", "limit": 10, "order": "newest"},
    {"path": "src/app.py", "content": "def main():\n    print('hi')\n    return 0\n"},
    {"user": {"name": "Ana Souza", "tags": ["admin", "ops"]}, "active": True},
    {"to": ["ana@example.com", "bo@example.com"], "subject": "Re: plan", "urgent": False},
    {"ticker": "ACME", "price": 12.5, "note": None},
    {"sql": "SELECT * FROM t WHERE name = 'x' AND n > 3", "timeout": 30},
    {"items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}], "coupon": "SPRING"},
    {"command": "ls -la /tmp", "cwd": "/home/user"},
    {"title": "Café ☕ review", "stars": 4, "text": 'Très bien, "great" coffee'},
    {"lat": 48.8566, "lon": 2.3522, "radius_km": 1.5},
    {"pattern": "^[a-z]+\\d{2}$", "flags": ["i", "m"]},
    # Long text, as agents send it: a whole file, a letter, a query.
    {"path": "src/report.py", "content": _CODE},
    {"to": "team@example.com", "subject": "Quarterly notes", "body": _LETTER},
    {"database": "sales", "query": _SQL},
]


def dump(
    value: Any,
    *,
    quote: str = '"',
    bare: bool = False,
    python: bool = False,
    trailing: bool = False,
    indent: int | None = None,
    level: int = 0,
) -> str:
    """A serializer that makes one chosen slip, everywhere it applies."""
    kw = {"quote": quote, "bare": bare, "python": python, "trailing": trailing, "indent": indent}
    pad = "" if indent is None else "\n" + " " * (indent * (level + 1))
    end = "" if indent is None else "\n" + " " * (indent * level)
    if isinstance(value, bool):
        return ("True" if value else "False") if python else ("true" if value else "false")
    if value is None:
        return "None" if python else "null"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        body = json.dumps(value, ensure_ascii=False)[1:-1]
        if quote == "'":
            body = body.replace('\\"', '"').replace("'", "\\'")
        return quote + body + quote
    if isinstance(value, list):
        parts = [pad + dump(v, level=level + 1, **kw) for v in value]  # type: ignore[arg-type]
        return "[" + ", ".join(parts) + ("," if trailing and parts else "") + end + "]"
    parts = []
    for k, v in value.items():
        key = k if bare else dump(k, quote=quote)
        parts.append(pad + key + ": " + dump(v, level=level + 1, **kw))  # type: ignore[arg-type]
    return "{" + ", ".join(parts) + ("," if trailing and parts else "") + end + "}"


def _last_string_cut(value: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """Truncate the text inside the last top-level string value: (text, expected)."""
    keys = list(value)
    last = keys[-1]
    if not isinstance(value[last], str) or len(value[last]) < 4:
        return None
    text = json.dumps(value, ensure_ascii=False)
    full = json.dumps(value[last], ensure_ascii=False)
    start = text.rindex(full)
    inner = full[1:-1]
    cut = len(inner) // 2
    while inner[:cut].endswith("\\"):
        cut -= 1
    cut_text = inner[:cut]
    expected = dict(value)
    expected[last] = json.loads('"' + cut_text + '"')
    return text[: start + 1 + cut], expected


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "price": {"type": "number"},
        "urgent": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "order": {"enum": ["newest", "oldest"]},
        "filters": {"type": "object", "properties": {"min": {"type": "number"}}},
        "note": {"type": "string"},
    },
    "required": ["count"],
}

# (text, expected arguments or None for a refusal), all under SCHEMA
TYPED: list[tuple[str, Any]] = [
    ('{"count": "3"}', {"count": 3}),
    ('{"count": 3.0}', {"count": 3}),
    ('{"count": "4.0"}', {"count": 4}),
    ('{"count": 2, "price": "9.99"}', {"count": 2, "price": 9.99}),
    ('{"count": 1, "urgent": "true"}', {"count": 1, "urgent": True}),
    ('{"count": 1, "urgent": "false"}', {"count": 1, "urgent": False}),
    ('{"count": 1, "tags": "solo"}', {"count": 1, "tags": ["solo"]}),
    ('{"count": 1, "tags": "[\\"a\\", \\"b\\"]"}', {"count": 1, "tags": ["a", "b"]}),
    ('{"count": 1, "order": "Newest"}', {"count": 1, "order": "newest"}),
    ('{"count": 1, "order": "OLDEST"}', {"count": 1, "order": "oldest"}),
    ('{"count": 1, "filters": "{\\"min\\": 2}"}', {"count": 1, "filters": {"min": 2}}),
    ('{"count": 1, "filters": {"min": "2.5", "max": 9}}', {"count": 1, "filters": {"min": 2.5}}),
    ('{"count": 1, "colour": "red"}', {"count": 1}),
    ('{"count": 1, "note": null}', {"count": 1}),
    (
        "{count: '7', urgent: 'true', order: 'newest',}",
        {"count": 7, "urgent": True, "order": "newest"},
    ),
    ('```json\n{"count": "2", "tags": "x"}\n```', {"count": 2, "tags": ["x"]}),
    ('{"arguments": {"count": "5"}}', {"count": 5}),
    ('{"count": 1, "urgent": "yes"}', None),
    ('{"count": 1, "urgent": "1"}', None),
    ('{"count": "3 apples"}', None),
    ('{"count": "about 3"}', None),
    ('{"count": 2.5}', None),
    ('{"count": 1, "note": 5}', None),
    ('{"price": 3}', None),
    ('{"count": 1, "order": "random"}', None),
    ('{"count": 1, "tags": [1, 2]}', None),
    ('{"count": null}', None),
]


def cases() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(kind: str, text: str, expect: Any = None, refuse: bool = False) -> None:
        out.append({"slip": kind, "text": text, "expect": expect, "refuse": refuse})

    for base in BASES:
        plain = json.dumps(base, ensure_ascii=False)
        add("valid", plain, base)
        add("valid-indented", json.dumps(base, indent=2, ensure_ascii=False), base)
        add("trailing-comma", dump(base, trailing=True), base)
        add("single-quotes", dump(base, quote="'"), base)
        add("bare-keys", dump(base, bare=True), base)
        add("python-literals", dump(base, python=True), base)
        add("comments", "{\n  // the arguments\n" + plain[1:-1] + "\n}", base)
        add("code-fence", "```json\n" + plain + "\n```", base)
        add(
            "code-fence-plain",
            "```\n" + json.dumps(base, indent=2, ensure_ascii=False) + "\n```",
            base,
        )
        add("unclosed-brace", plain[:-1], base)
        add("mixed", dump(base, quote="'", bare=True, python=True, trailing=True, indent=2), base)
        keys = list(base)
        if len(keys) > 1:
            first = {k: base[k] for k in keys[: len(keys) // 2]}
            second = {k: base[k] for k in keys[len(keys) // 2 :]}
            add("joined-objects", json.dumps(first) + json.dumps(second), base)
        add("two-calls", plain + "\n" + plain, base)
        add("string-encoded", json.dumps(plain), base)
        add("envelope", json.dumps({"arguments": base}, ensure_ascii=False), base)
        cut = _last_string_cut(base)
        if cut:
            add("unclosed-string", *cut)
        # refusals built from the same value
        add("prose-around", "Sure, I'll call it: " + plain + " and report back.", refuse=True)
        add(
            "call-syntax",
            "f(" + ", ".join(f"{k}={json.dumps(v)}" for k, v in base.items()) + ")",
            refuse=True,
        )
        add("cut-before-value", plain[: plain.index(":") + 1], refuse=True)
    # slips that need a particular value
    add(
        "control-characters",
        '{"path": "a.txt", "content": "line 1\nline 2\n\tend"}',
        {"path": "a.txt", "content": "line 1\nline 2\n\tend"},
    )
    # \U and \d are no JSON escapes: kept as written (\n would be a newline, rightly)
    add(
        "invalid-escape",
        '{"path": "C:\\Users\\ana\\docs.txt"}',
        {"path": "C:\\Users\\ana\\docs.txt"},
    )
    for text in [
        "",
        "   ",
        "I think the city is {Paris} and days {3}",
        "{city}",
        '{"city": "Paris", "days": NaN}',
        '{"days": 3 "city": "Paris"}',
        '{"city": Paris}',
        "{'city': 'Paris', 'days': three}",
        '{"a": }',
        "[}",
        "null",
    ]:
        add("refusal", text, refuse=True)
    for text, expect in TYPED:
        out.append(
            {
                "slip": "typed",
                "text": text,
                "expect": expect,
                "refuse": expect is None,
                "schema": "typed",
            }
        )
    return out


def main() -> None:
    corpus = cases()
    path = Path(__file__).with_name("argument_corpus.json")
    data = {"version": 1, "schemas": {"typed": SCHEMA}, "cases": corpus}
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n")
    print(f"{len(corpus)} cases written to {path}")


if __name__ == "__main__":
    main()
