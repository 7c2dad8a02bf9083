"""Constrained calls: a grammar (GBNF, as llama.cpp takes it) for exactly a valid call to a
declared tool, in the model's own format, and the triggers that say a call has begun.

Small models often start a call right and finish it wrong: a misspelt argument, a string
where the schema wants a number, a missing brace. On an engine that can sample under a
grammar, the call is finished under one, so it names a declared tool and its arguments
match the tool's schema. Only calls are constrained, never thinking or a plain answer:
generation is free until the text shows that a call has begun —

* the family's own call marker (``<tool_call>`` for Hermes, ``[TOOL_CALLS]`` for Mistral…),
  outside thinking; from there the grammar is the family's form
  (:mod:`toolwire.formats.grammar`, each family's ``grammar``), one call or several — one
  only with ``parallel_tool_calls`` false;
* a pattern the family's form starts a reply with only (a bare Python list ``[NAME(``,
  Functionary's ``NAME\n``), at the reply's opening;
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
rules through llama-cpp-python's own converter (the port of llama.cpp's; see
:class:`~toolwire.formats.grammar.Rules`), imported when a grammar is built; a schema it
cannot convert leaves that tool's arguments any JSON object.
Tool schemas without ``additionalProperties`` get no keys beyond their properties: a key
the tool does not declare is never a valid argument.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .grammar import Form, JsonCall, Rules, lit

if TYPE_CHECKING:
    from .base import Family

__all__ = ["Constraint", "Trigger", "constraint_for"]

#: The reply so far is looked at for an opening call only while it is this short.
_OPENING_CHARS = 400


@dataclass(frozen=True)
class Trigger:
    """A call has begun at ``at`` (an index into the reply's text); ``form`` is ``family``
    (the family's marker), ``start`` (a pattern the family's calls open a reply with) or
    ``opening`` (a call object opening the reply)."""

    at: int
    form: str


#: A slot in a trigger: a declared tool's name, or white space (up to a few characters).
_SLOT = re.compile(r"\{name\}|\{space\}")


def _parts(trigger: str) -> list[str]:
    """A trigger's literal texts and slots, in order."""
    return [p for p in re.split(r"(\{name\}|\{space\})", trigger) if p]


def _loose(text: str) -> str:
    """A start pattern's literal text as a pattern that takes white space where a JSON
    grammar does, around its brackets, colons and commas (``[{"name":`` is also
    ``[\\n  {"name" :``). The pattern's own white space stays what it is: a line break is
    a line break (Functionary's ``NAME\\n`` is never ``NAME`` and a space, the start of
    prose), spaces are some spaces."""
    out: list[str] = []
    json_space = False  # JSON's optional white space is due before what comes next
    for ch in text:
        if ch in "[]{}:,":
            if out and out[-1] == r"[ \t]+":
                out.pop()  # a space before it is JSON's, and may be none
            out.append(r"\s*" + re.escape(ch))
            json_space = True
            continue
        if json_space and ch in " \t":
            continue  # a space after it is JSON's too
        if json_space:
            out.append(r"\s*")
            json_space = False
        if ch == "\n":
            out.append(r"[ \t]*\n")
        elif ch.isspace():
            out.append(r"[ \t]+")
        else:
            out.append(re.escape(ch))
    if json_space:
        out.append(r"\s*")
    return re.sub(r"(?:\[ \\t\]\+)+", lambda _: r"[ \t]+", "".join(out))


@dataclass(frozen=True)
class Constraint:
    """What the engine needs to constrain this turn's calls."""

    #: ``(name, parameters)`` of each declared tool.
    tools: tuple[tuple[str, Mapping[str, Any]], ...]
    #: The family's form, when it has one.
    form: Form | None
    #: Constrained from the first token (``tool_choice`` required or named).
    required: bool = False
    #: False: at most one call (``parallel_tool_calls`` false).
    parallel: bool = True

    def __post_init__(self) -> None:
        names = "|".join(re.escape(json.dumps(name)) for name, _ in self.tools)
        opening = r"\A\s*(?:```(?:json|JSON)?[ \t]*\n\s*)?\{\{?\s*\"name\"\s*:\s*(?:" + names + ")"
        object.__setattr__(self, "_opening", re.compile(opening))
        bare = "(?:" + "|".join(re.escape(name) for name, _ in self.tools) + ")"
        starts = [
            r"\A\s*" + bare.join(_loose(part) for part in pattern.split("{name}"))
            for pattern in (self.form.starts if self.form else ())
        ]
        object.__setattr__(self, "_starts", re.compile("|".join(starts)) if starts else None)
        # a marker that is a call only when a declared tool's name follows (``>>>NAME``), or
        # the opening word after it, past any white space (``Action:`` then ```` ```json ````)
        named = [t for t in (self.form.triggers if self.form else ()) if _SLOT.search(t)]
        longest = max((len(name) for name, _ in self.tools), default=0)
        slots = {"{name}": (bare, longest), "{space}": (r"\s{0,8}", 8)}
        object.__setattr__(
            self,
            "_named",
            [
                (
                    re.compile(
                        "".join(slots[p][0] if p in slots else re.escape(p) for p in _parts(t))
                    ),
                    sum(slots[p][1] if p in slots else len(p) for p in _parts(t)),
                )
                for t in named
            ],
        )

    def trigger(self, text: str, *, searched: int = 0, thinking: bool = False) -> Trigger | None:
        """Where a call begins in the reply's ``text`` so far, or None.

        ``searched``: the text before this index was searched already (each call costs the
        new text only). ``thinking``: the reply is inside its thinking, where calls are
        never constrained.
        """
        if thinking:
            return None
        if len(text) <= _OPENING_CHARS:
            if self._opening.match(text):  # type: ignore[attr-defined]
                return Trigger(0, "opening")
            starts: re.Pattern[str] | None = self._starts  # type: ignore[attr-defined]
            if starts is not None and starts.match(text):
                return Trigger(0, "start")
        found = -1
        for marker in self.form.triggers if self.form else ():
            if _SLOT.search(marker):
                continue
            at = text.find(marker, max(0, searched - len(marker) + 1))
            if at >= 0 and (found < 0 or at < found):
                found = at
        named: list[tuple[re.Pattern[str], int]] = self._named  # type: ignore[attr-defined]
        for pattern, length in named:
            match = pattern.search(text, max(0, searched - length + 1))
            if match is not None and (found < 0 or match.start() < found):
                found = match.start()
        return Trigger(found, "family") if found >= 0 else None

    def grammar(self, form: str, lead: str = "") -> str:
        """The GBNF for the call block that begins with ``lead`` (text already written
        before the form's start, in the same token) in ``form`` (``family``, ``start``,
        ``opening`` or ``required``)."""
        rules = Rules()
        if form == "opening" or (form == "required" and self.form is None):
            # one call object: after a call small models write more objects (the result
            # they expect, echoed), which a grammar of calls would turn into repeated calls
            body = (self.form.json_body() if self.form else None) or JsonCall()
            calls = [
                rules.add(f"tool{i}", body.call(rules, i, name, params))
                for i, (name, params) in enumerate(self.tools)
            ]
            call = rules.add("call", " | ".join(calls))
            fence = '"```" ("json" | "JSON")? [ \\t]* "\\n" space body space "```"'
            rules.add("body", f'{call} | "{{" space {call} space "}}"')
            root = f"space ({fence} | body) space"
        elif form in ("required", "start"):
            assert self.form is not None
            root = self.form.required(rules, self.tools, parallel=self.parallel) + " space"
        else:
            assert self.form is not None
            root = self.form.block(rules, self.tools, parallel=self.parallel) + " space"
        out = rules.rules()
        out["root"] = (lit(lead) + " " if lead else "") + root
        return "\n".join(f"{name} ::= {rule}" for name, rule in out.items())


def constraint_for(
    family: Family | str | None,
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    required: bool = False,
    parallel: bool = True,
) -> Constraint | None:
    """The constraint for a turn with these tools, read in this family's grammar (a family,
    or a registered family's name); None when there is no tool to call."""
    declared: list[tuple[str, Mapping[str, Any]]] = []
    for tool in tools or ():
        fn = tool.get("function", tool)
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
            continue
        params = fn.get("parameters")
        declared.append((fn["name"], params if isinstance(params, Mapping) else {}))
    if not declared:
        return None
    if isinstance(family, str):
        from .registry import get_family

        family = get_family(family)
    form = family.grammar if family is not None else None
    return Constraint(tuple(declared), form, required, parallel)
