"""Call bodies whose arguments are written as a language's literals, not JSON.

Python calls (``[get_weather(city="Paris", days=3)]``: Llama 4's pythonic form, LFM2) and
Gemma 4's own literals (``call:NAME{city:<|"|>Paris<|"|>}``): each argument typed by the
tool's schema, nested lists and mappings in the same literal syntax, as the families'
readers read them. The rest of the vocabulary is :mod:`toolwire.formats.grammar`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .grammar import Body, Rules, lit, properties_of, schema_type, sequence_of

__all__ = ["GEMMA_QUOTE", "Gemma", "Pythonic"]


def _python_string(rules: Rules) -> str:
    return rules.add(
        "py-string",
        '"\'" ([^\'\\\\] | "\\\\" [^\\x00])* "\'" | "\\"" ([^"\\\\] | "\\\\" [^\\x00])* "\\""',
    )


@dataclass(frozen=True)
class Pythonic(Body):
    """``N(k=V, …)``, each value a Python literal of the property's type (lists and dicts
    nested the same way: ``True``, ``None``, quoted keys); with ``json_values``, the JSON
    of the property's schema, as a template's ``tojson`` writes it (MiniCPM3's)."""

    json_values: bool = False

    def call(self, rules: Rules, i: int, name: str, params: Mapping[str, Any]) -> str:
        items: list[tuple[str, bool]] = []
        for key, schema, required in properties_of(params):
            if self.json_values:
                value = rules.value(schema, f"tool{i}-{key}")
            else:
                value = _python_value(rules, schema, f"tool{i}-{key}")
            rule = rules.add(f"tool{i}-kw-{key}", f'{lit(key)} space "=" space {value}')
            items.append((rule, required))
        return f'{lit(name)} "(" space {sequence_of(items, chr(34) + "," + chr(34))} space ")"'


def _python_quoted(text: str) -> str:
    return f"({lit(repr(text))} | {lit(json.dumps(text, ensure_ascii=False))})"


def _python_value(rules: Rules, schema: Mapping[str, Any], name: str) -> str:
    kind = schema_type(schema)
    if "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        return "(" + " | ".join(_python_quoted(v) for v in schema["enum"]) + ")"
    if kind == "string":
        return _python_string(rules)
    if kind == "boolean":
        return '("True" | "False")'
    if kind == "null":
        return '"None"'
    if kind in ("integer", "number"):
        return rules.value(schema, name)
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        item = rules.add(f"{name}-item", _python_value(rules, schema["items"], f"{name}-item"))
        return f'"[" space ({item} (space "," space {item})*)? space "]"'
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        items = [
            (
                rules.add(
                    f"{name}-kv-{key}",
                    f'{_python_quoted(key)} space ":" space '
                    f"{_python_value(rules, sub, f'{name}-{key}')}",
                ),
                required,
            )
            for key, sub, required in properties_of(schema)
        ]
        return rules.add(
            name, f'"{{" space {sequence_of(items, chr(34) + "," + chr(34))} space "}}"'
        )
    return _python_any(rules)


def _python_any(rules: Rules) -> str:
    """Any Python literal of a JSON value (a schema that says no more)."""
    string = _python_string(rules)
    number = '"-"? [0-9]+ ("." [0-9]+)? ([eE] [-+]? [0-9]+)?'
    return rules.add(
        "py-any",
        f'{string} | {number} | "True" | "False" | "None" | '
        '"[" space (py-any (space "," space py-any)*)? space "]" | '
        f'"{{" space ({string} space ":" space py-any '
        f'(space "," space {string} space ":" space py-any)*)? space "}}"',
    )


#: Gemma 4's string quote, a token of its own.
GEMMA_QUOTE = '<|"|>'


@dataclass(frozen=True)
class Gemma(Body):
    """``call:N{k:V,…}``: keys bare and sorted, every value in Gemma's own literal syntax (a
    string between ``<|"|>`` quotes, verbatim; lists and mappings nested the same way).
    ``prefix`` is what comes before the name; ``quote`` the string delimiter (FunctionGemma's
    is ``<escape>``)."""

    prefix: str = "call:"
    quote: str = GEMMA_QUOTE

    @property
    def leading_space(self) -> bool:
        return False

    def call(self, rules: Rules, i: int, name: str, params: Mapping[str, Any]) -> str:
        before = f"{lit(self.prefix)} " if self.prefix else ""
        return f"{before}{lit(name)} {_gemma_object(rules, params, f'tool{i}', self.quote)}"


def _gemma_object(rules: Rules, schema: Mapping[str, Any], name: str, quote: str) -> str:
    items: list[tuple[str, bool]] = []
    for key, sub, required in sorted(properties_of(schema)):
        value = _gemma_value(rules, sub, f"{name}-{key}", quote)
        items.append((rules.add(f"{name}-kv-{key}", f'{lit(key)} ":" {value}'), required))
    if not items and schema.get("additionalProperties", False) is not False:
        return _gemma_any(rules, quote)
    return f'"{{" {sequence_of(items, chr(34) + "," + chr(34))} "}}"'


def _gemma_value(rules: Rules, schema: Mapping[str, Any], name: str, quote: str) -> str:
    q = lit(quote)
    kind = schema_type(schema)
    if "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        return f"{q} ({' | '.join(lit(v) for v in schema['enum'])}) {q}"
    if kind == "string":
        return f"{q} {rules.through(quote)}"
    if kind in ("integer", "number", "boolean", "null"):
        return rules.value(schema, name)
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        item = rules.add(
            f"{name}-item", _gemma_value(rules, schema["items"], f"{name}-item", quote)
        )
        return f'"[" ({item} ("," {item})*)? "]"'
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        return rules.add(name, _gemma_object(rules, schema, name, quote))
    return _gemma_any(rules, quote)


def _gemma_any(rules: Rules, quote: str) -> str:
    """Any value in Gemma's syntax (a schema that says no more)."""
    q = lit(quote)
    number = '"-"? [0-9]+ ("." [0-9]+)? ([eE] [-+]? [0-9]+)?'
    key = "[A-Za-z_] [A-Za-z0-9_]*"
    return rules.add(
        "gemma-any",
        f'{q} {rules.through(quote)} | {number} | "true" | "false" | "null" | '
        '"[" (gemma-any ("," gemma-any)*)? "]" | '
        f'"{{" ({key} ":" gemma-any ("," {key} ":" gemma-any)*)? "}}"',
    )
