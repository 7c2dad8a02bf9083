"""Constrained calls: a grammar (GBNF, as llama.cpp takes it) for exactly a valid call to a
declared tool, in the model's own format, and the triggers that say a call has begun.

Small models often start a call right and finish it wrong: a misspelt argument, a string
where the schema wants a number, a missing brace. On an engine that can sample under a
grammar, the call is finished under one, so it names a declared tool and its arguments
match the tool's schema. Only calls are constrained, never thinking or a plain answer:
generation is free until the text shows that a call has begun —

* the family's own call marker (``<tool_call>`` for Hermes), outside thinking; from there
  the grammar is the family's form, one call or several;
* a reply that opens with a call object naming a declared tool, bare or in a ````json``
  fence, as the default model writes its calls (``{"name": "get_weather"`` — the name
  must be complete and declared, so a JSON answer is never turned into a call, and a
  call the model names wrong, ``{"name": "Planning", …}``, is never made a declared one:
  triggered at the name key instead, the 1.5B model's false calls went from 50% to 90% of
  the bench's cases that need none); from
  there the grammar is that one object, and the reply ends with it.

Between calls, when the model's own next token is not one the grammar allows but the grammar
may end there, the reply ends (see :mod:`toolwire.backends.constrain`): a model that wants
to go on with something other than a call is never pushed into another one.

With ``tool_choice`` ``required`` (or a named function) the grammar holds from the first
token: the family's form when it has one, else the call object.

This module is pure: it builds grammar text and finds triggers in text. The engine applies
the grammar (see :mod:`toolwire.backends.constrain`). Argument schemas become grammar
rules through llama-cpp-python's own converter (the port of llama.cpp's), imported when a
grammar is built; a schema it cannot convert leaves that tool's arguments any JSON object.
Tool schemas without ``additionalProperties`` get no keys beyond their properties: a key
the tool does not declare is never a valid argument.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FORMS", "Constraint", "Form", "Trigger", "constraint_for"]


@dataclass(frozen=True)
class Form:
    """How a family writes a block of calls: each call object between ``open`` and
    ``close``, its arguments under ``arguments``."""

    open: str
    close: str
    arguments: str = "arguments"


#: The families whose call form is a JSON call object between tags.
FORMS: Mapping[str, Form] = {
    "hermes": Form("<tool_call>", "</tool_call>"),
}

#: The reply so far is looked at for an opening call only while it is this short.
_OPENING_CHARS = 400


@dataclass(frozen=True)
class Trigger:
    """A call has begun at ``at`` (an index into the reply's text); ``form`` is ``family``
    (the family's marker) or ``opening`` (a call object opening the reply)."""

    at: int
    form: str


@dataclass(frozen=True)
class Constraint:
    """What the engine needs to constrain this turn's calls."""

    #: ``(name, parameters)`` of each declared tool.
    tools: tuple[tuple[str, Mapping[str, Any]], ...]
    #: The family's form, when it has one.
    form: Form | None
    #: Constrained from the first token (``tool_choice`` required or named).
    required: bool = False

    def __post_init__(self) -> None:
        names = "|".join(re.escape(json.dumps(name)) for name, _ in self.tools)
        opening = r"\A\s*(?:```(?:json|JSON)?[ \t]*\n\s*)?\{\{?\s*\"name\"\s*:\s*(?:" + names + ")"
        object.__setattr__(self, "_opening", re.compile(opening))

    def trigger(self, text: str, *, searched: int = 0, thinking: bool = False) -> Trigger | None:
        """Where a call begins in the reply's ``text`` so far, or None.

        ``searched``: the text before this index was searched already (each call costs the
        new text only). ``thinking``: the reply is inside its thinking, where calls are
        never constrained.
        """
        if thinking:
            return None
        if len(text) <= _OPENING_CHARS and self._opening.match(text):  # type: ignore[attr-defined]
            return Trigger(0, "opening")
        if self.form is not None:
            at = text.find(self.form.open, max(0, searched - len(self.form.open) + 1))
            if at >= 0:
                return Trigger(at, "family")
        return None

    def grammar(self, form: str, lead: str = "") -> str:
        """The GBNF for the call block that begins with ``lead`` (text already written
        before the form's start, in the same token) in ``form`` (``family``, ``opening``
        or ``required``)."""
        rules, call = _call_rules(self.tools, self.form.arguments if self.form else "arguments")
        if form == "opening" or (form == "required" and self.form is None):
            # one call object: after a call small models write more objects (the result
            # they expect, echoed), which a grammar of calls would turn into repeated calls
            fence = '"```" ("json" | "JSON")? [ \\t]* "\\n" space body space "```"'
            rules["body"] = f'{call} | "{{" space {call} space "}}"'
            root = f"space ({fence} | body) space"
        else:
            assert self.form is not None
            block = f"{_literal(self.form.open)} space {call} space {_literal(self.form.close)}"
            rules["block"] = block
            root = "block (space block)* space"
            if form == "required":
                root = "space " + root
        rules["root"] = (_literal(lead) + " " if lead else "") + root
        return "\n".join(f"{name} ::= {rule}" for name, rule in rules.items())


def constraint_for(
    family_name: str | None,
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    required: bool = False,
) -> Constraint | None:
    """The constraint for a turn with these tools, read in this family's grammar; None
    when there is no tool to call."""
    declared: list[tuple[str, Mapping[str, Any]]] = []
    for tool in tools or ():
        fn = tool.get("function", tool)
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
            continue
        params = fn.get("parameters")
        declared.append((fn["name"], params if isinstance(params, Mapping) else {}))
    if not declared:
        return None
    form = FORMS.get(family_name) if family_name else None
    return Constraint(tuple(declared), form, required)


#: White space between JSON tokens and around tags: bounded, so it cannot run on.
_SPACE = '| " " | "\\n"{1,2} [ \\t]{0,20}'


def _literal(text: str) -> str:
    """A GBNF string literal."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _call_rules(
    tools: Sequence[tuple[str, Mapping[str, Any]]], arguments: str
) -> tuple[dict[str, str], str]:
    """The rules for one call to any declared tool, and the rule that names it."""
    from llama_cpp.llama_grammar import SchemaConverter

    converter: Any = SchemaConverter(  # type: ignore[no-untyped-call]
        prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False
    )
    calls = []
    for i, (name, params) in enumerate(tools):
        args = _arguments_rule(converter, params, f"tool{i}-arguments")
        key = _literal(json.dumps(arguments))
        converter._add_rule(  # the converter's own way to add a rule
            f"tool{i}",
            f'"{{" space {_literal(json.dumps("name"))} space ":" space '
            f"{_literal(json.dumps(name, ensure_ascii=False))} space "
            f'"," space {key} space ":" space {args} space "}}"',
        )
        calls.append(f"tool{i}")
    rules: dict[str, str] = dict(converter._rules)
    # white space as models write JSON: none, a space, or a new line and its indent
    rules["space"] = _SPACE
    rules["call"] = " | ".join(calls)
    return rules, "call"


def _arguments_rule(converter: Any, params: Mapping[str, Any], name: str) -> str:
    """The rule for a tool's arguments object: its schema, converted; any JSON object when
    the converter cannot take it."""
    schema: dict[str, Any] = dict(params) if params else {"type": "object"}
    if schema.get("type", "object") == "object" and "additionalProperties" not in schema:
        schema["additionalProperties"] = False
    try:
        schema = converter.resolve_refs(schema, "")
        return str(converter.visit(schema, name))
    except Exception:
        return str(converter.visit({"type": "object"}, name + "-any"))
