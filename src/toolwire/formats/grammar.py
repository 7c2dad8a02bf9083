"""A small vocabulary of call forms, each building the GBNF of a valid call in its family's
own grammar.

Every family writes a call as some arrangement of a few parts: texts around the calls (the
block), texts around each call, the tool's name, and its arguments. The arguments come in
four ways, and so the vocabulary has four bodies:

* :class:`JsonCall` — one JSON object holding the name and the arguments under keys that vary
  (``{"name": N, "arguments": {…}}``, Llama's ``parameters``, Cohere's ``tool_name``,
  Apertus's ``{N: {…}}``), maybe with an id;
* :class:`NamedJson` — the name in markup, then the arguments as a JSON object (DeepSeek,
  Kimi's ``functions.N:0<|tool_call_argument_begin|>{…}``, Functionary, Mistral's
  ``N[ARGS]{…}``, gpt-oss);
* :class:`Tagged` — the name in markup, then each argument between tags of its own (Qwen's
  ``<parameter=K>V</parameter>``, GLM's ``<arg_key>``/``<arg_value>``, MiniMax, DSML, …): a
  string is its raw text (anything but the argument's closing text and the form's own tags,
  with no white space at its ends but a line break), any other value its JSON;
* :class:`Pythonic` — ``N(k='v', n=3)``; and :class:`Gemma` — ``call:N{k:<|"|>v<|"|>}``.

A :class:`CallForm` puts a body between its texts: calls each in a block of their own
(``blocks``, Hermes's ``<tool_call>…</tool_call>`` repeated) or all in one block, separated
(a list's ``[…, …]``). It builds three grammars: a block of calls, at most one call
(``parallel_tool_calls`` false), and the same from the reply's first token (``tool_choice``
required: ``prefix`` is what may come before the block there). :class:`AnyOf` is a family
that writes more than one form (Mistral's old list and its newer ``[TOOL_CALLS]N[ARGS]``).
Its ``triggers`` are the texts that say a call has begun anywhere in a reply; ``starts``
the patterns that say so only at the reply's start. In both ``{name}`` stands for any
declared tool's name: a bare Python list ``[get_weather(`` is a call only when it opens the
reply, and Functionary's ``>>>`` only when a tool's name follows (``>>>all`` opens text).

Arguments follow each tool's schema: in JSON, through llama.cpp's own schema converter (see
:mod:`toolwire.formats.gbnf`); between tags, each property in its declared order, the
required ones present. A value is bounded only by the engine's token limit. Pure: text in,
text out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .grammar_rules import (
    Rules,
    cat,
    lit,
    properties_of,
    schema_type,
    sequence_of,
    unlit,
    words,
)

__all__ = [
    "AnyOf",
    "Body",
    "CallForm",
    "Form",
    "JsonCall",
    "NamedJson",
    "Rules",
    "Tagged",
    "cat",
    "lit",
    "properties_of",
    "schema_type",
    "sequence_of",
    "words",
]

Tool = tuple[str, Mapping[str, Any]]

#: A call id a model writes (Mistral's nine letters and digits, Solar's, Cohere's index).
_ID = "[A-Za-z0-9_-]{1,40}"


class Body:
    """One call to one tool: what stands between the call's own texts."""

    #: May white space come before the body? Not where it opens with the bare name (GLM's
    #: ``<tool_call>NAME``): readers take the name from right after the marker.
    @property
    def leading_space(self) -> bool:
        return True

    def call(self, rules: Rules, i: int, name: str, params: Mapping[str, Any]) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class EitherBody(Body):
    """A call written in either body, its first character telling which (a family whose
    calls may also be JSON objects in the same framing: K2 Horizon's tags)."""

    first: Body
    second: Body

    @property
    def leading_space(self) -> bool:
        return self.first.leading_space

    def call(self, rules: Rules, i: int, name: str, params: Mapping[str, Any]) -> str:
        one = rules.add(f"tool{i}-a", self.first.call(rules, i, name, params))
        other = rules.add(f"tool{i}-b", self.second.call(rules, i, name, params))
        return f"{one} | {other}"


@dataclass(frozen=True)
class JsonCall(Body):
    """``{"name": N, "arguments": {…}}``, the keys as the family writes them; ``name_is_key``:
    ``{N: {…}}``; ``id_key``: an id member, first or last (optional)."""

    name_key: str = "name"
    args_key: str = "arguments"
    name_is_key: bool = False
    id_key: str | None = None
    id_first: bool = False
    #: Other members the object may hold, ``(key, GBNF value)``: before the name or after
    #: the arguments (a learned shape knows them, not where they go).
    extra: tuple[tuple[str, str], ...] = ()

    def call(self, rules: Rules, i: int, name: str, params: Mapping[str, Any]) -> str:
        args = rules.arguments(params, f"tool{i}-arguments")
        quoted = lit(json.dumps(name, ensure_ascii=False))
        if self.name_is_key:
            return f'"{{" space {quoted} space ":" space {args} space "}}"'
        members = [
            f'{lit(json.dumps(self.name_key))} space ":" space {quoted}',
            f'{lit(json.dumps(self.args_key))} space ":" space {args}',
        ]
        # either order: the readers take both, and templates write both (vLLM's Hermes
        # template renders "arguments" first)
        first, second = members
        body = f'({first} space "," space {second} | {second} space "," space {first})'
        if self.id_key is not None:
            member = f'{lit(json.dumps(self.id_key))} space ":" space "\\"" {_ID} "\\""'
            if self.id_first:
                body = f'({member} space "," space)? {body}'
            else:
                body = f'{body} (space "," space {member})?'
        if self.extra:
            others = " | ".join(
                f'{lit(json.dumps(key))} space ":" space {value}' for key, value in self.extra
            )
            body = f'(({others}) space "," space)* {body} (space "," space ({others}))*'
        return f'"{{" space {body} space "}}"'


@dataclass(frozen=True)
class NamedJson(Body):
    """``before`` N ``between`` {…} ``after``: each a GBNF fragment (see :func:`lit`)."""

    before: str = '""'
    between: str = '""'
    after: str = '""'
    #: May white space come before ``before``? Not before a bare word (R1's ``function``).
    lead: bool = True

    @property
    def leading_space(self) -> bool:
        return self.lead and self.before != '""'

    def call(self, rules: Rules, i: int, name: str, params: Mapping[str, Any]) -> str:
        args = rules.arguments(params, f"tool{i}-arguments")
        return f"{self.before} {lit(name)} {self.between} space {args} space {self.after}"


#: A boolean between tags, as the templates write it: JSON's, or Python's (Qwen's and
#: Seed's templates render a boolean with Python's ``str``).
_TAG_BOOL = '("true" | "false" | "True" | "False")'


@dataclass(frozen=True)
class Tagged(Body):
    """``before`` N ``between`` then each argument ``arg_open`` V ``arg_close``, then
    ``after``. ``arg_open``/``arg_close`` are texts (white space allowed between them) with
    ``{key}`` and ``{type}`` in them; ``types`` maps a schema's type to the text ``{type}``
    stands for (``*``: any other type). A string value is raw text up to the first text of
    ``arg_close``; any other value its JSON."""

    before: str
    between: str
    after: str
    arg_open: tuple[str, ...]
    arg_close: tuple[str, ...]
    types: tuple[tuple[str, str], ...] = ()
    #: A string value has no white space at its ends (see :meth:`Rules.trimmed`).
    trim: bool = True
    #: Texts a string value never holds (the form's own tags; with ``trim``, and besides the
    #: opening of another argument).
    markup: tuple[str, ...] = ()
    #: May white space come before ``before``?
    lead: bool = True
    #: The tags around a value's type, which may come before ``arg_open``'s last text
    #: (K2 Horizon's ``<ifm|arg_type>string</ifm|arg_type>``): the schema's type between.
    arg_type: tuple[str, ...] = ()

    @property
    def leading_space(self) -> bool:
        return self.lead and self.before != '""'

    def _type_text(self, kind: str) -> str:
        table = dict(self.types)
        return table.get(kind, table.get("*", "string" if kind == "any" else kind))

    def call(self, rules: Rules, i: int, name: str, params: Mapping[str, Any]) -> str:
        items: list[tuple[str, bool]] = []
        # the opener's texts before the key, the same for every argument: written once
        # before the choice of an argument (see :func:`sequence_of`)
        lead = (
            0
            if self.arg_type
            else next((k for k, t in enumerate(self.arg_open) if "{" in t), len(self.arg_open))
        )
        for key, schema, required in properties_of(params):
            kind = schema_type(schema)
            typed = self._type_text(kind)
            opener = [t.format(key=key, type=typed) for t in self.arg_open]
            closer = [t.format(key=key, type=typed) for t in self.arg_close]
            if kind == "string":
                if self.trim:
                    static = self.arg_open[0].split("{")[0]
                    # another argument's opening; each in full only where their common
                    # start is the closer's too (MiniMax M3's ``NS<K>`` and ``NS</K>``)
                    others = [
                        self.arg_open[0].format(key=k, type=self._type_text(schema_type(sub)))
                        for k, sub, _ in properties_of(params)
                        if k != key and closer[0].startswith(static)
                    ]
                    tags = (
                        *self.markup,
                        *rules.markup,
                        *others,
                        self.arg_open[0].split("{")[0],
                        unlit(self.after),
                    )
                    raw = rules.trimmed(closer[0], [t for t in tags if not closer[0].startswith(t)])
                else:
                    raw = rules.through(closer[0])
                value = f"{raw} space {words(closer[1:])}"
            else:
                scalar = _TAG_BOOL if kind == "boolean" else rules.value(schema, f"tool{i}-{key}")
                value = f"space {scalar} space {words(closer)}"
            head = words(opener[lead:])
            if self.arg_type:  # the value's type, written or not
                kind_tag = words((self.arg_type[0], kind, self.arg_type[1]))
                head = f"{words(opener[:-1])} (space {kind_tag})? space {words(opener[-1:])}"
            rule = rules.add(f"tool{i}-arg-{key}", f"{head} {value}")
            items.append((rule, required))
        args = sequence_of(items, "", words(self.arg_open[:lead]) if lead else "")
        return f"{self.before} {lit(name)} {self.between} space {args} space {self.after}"


class Form:
    """What every form gives :class:`~toolwire.formats.gbnf.Constraint`."""

    #: Texts that say a call has begun, anywhere in the reply (``{name}``: a declared tool's
    #: name, for a marker that may also open something else: Functionary's ``>>>all``;
    #: ``{space}``: white space, after a plain-word marker: Command R+'s ``Action:``).
    triggers: tuple[str, ...] = ()
    #: Patterns that say so at the reply's start only (``{name}``: a declared tool's name).
    starts: tuple[str, ...] = ()

    def block(self, rules: Rules, tools: Sequence[Tool], *, parallel: bool = True) -> str:
        """The expression for the calls from where a trigger starts them."""
        raise NotImplementedError

    def required(self, rules: Rules, tools: Sequence[Tool], *, parallel: bool = True) -> str:
        """The expression for a reply that is its calls, from its first token."""
        raise NotImplementedError

    def json_body(self) -> JsonCall | None:
        """The family's JSON call object, for a reply that opens with one (None: the usual
        ``{"name": …, "arguments": …}``)."""
        return None


@dataclass(frozen=True)
class CallForm(Form):
    """Calls written with ``body`` between ``call_open`` and ``call_close`` (GBNF fragments),
    inside ``open``…``close``; two calls separated by ``sep``. With ``blocks`` each call has
    its own ``open``…``close``. ``prefix`` may come before the block in a reply that is
    nothing but its calls (the rest of a message header); ``tail`` may come once after the
    last call (a message's end that is not the turn's: Glimmer's ``<|eom|>``)."""

    body: Body
    open: str = '""'
    close: str = '""'
    call_open: str = '""'
    call_close: str = '""'
    sep: str = '""'
    blocks: bool = False
    triggers: tuple[str, ...] = ()
    starts: tuple[str, ...] = ()
    prefix: str = '""'
    tail: str = '""'

    def _call(self, rules: Rules, tools: Sequence[Tool]) -> str:
        calls = [
            rules.add(f"tool{i}", self.body.call(rules, i, name, params))
            for i, (name, params) in enumerate(tools)
        ]
        one = rules.add("call", " | ".join(calls))
        if self.body.leading_space:
            return cat(self.call_open, one, self.call_close)
        return cat(f"{self.call_open} {one}" if self.call_open != '""' else one, self.call_close)

    def block(self, rules: Rules, tools: Sequence[Tool], *, parallel: bool = True) -> str:
        calls = self._block(rules, tools, parallel=parallel)
        return calls if self.tail == '""' else f"{calls} (space {self.tail})?"

    def _block(self, rules: Rules, tools: Sequence[Tool], *, parallel: bool) -> str:
        texts = (self.open, self.close, self.call_open, self.call_close, self.sep)
        rules.markup = (*self.triggers, *(t for t in map(unlit, texts) if t.strip()))
        call = rules.add("form-call", self._call(rules, tools))
        tight = not self.body.leading_space and self.call_open == '""'

        def after(head: str, then: str) -> str:
            """``then`` after ``head``: white space between them unless the name follows."""
            if head in ("", '""'):
                return then
            return f"{head} {then}" if tight else cat(head, then)

        if self.blocks:
            one = rules.add("form-block", cat(after(self.open, call), self.close))
            sep = after(self.sep, one) if self.open == '""' else cat(self.sep, one)
            more = f"(space {sep})*" if parallel else ""
            return f"{one} {more}".strip()
        more = f"(space {after(self.sep, call)})*" if parallel else ""
        return cat(after(self.open, f"{call} {more}".strip()), self.close)

    def required(self, rules: Rules, tools: Sequence[Tool], *, parallel: bool = True) -> str:
        block = self.block(rules, tools, parallel=parallel)
        if self.prefix == '""':
            return f"space {block}"
        return f"space ({self.prefix})? {block}"

    def json_body(self) -> JsonCall | None:
        return self.body if isinstance(self.body, JsonCall) else None


@dataclass(frozen=True)
class AnyOf(Form):
    """A family that writes any of several forms (a reply is in one of them)."""

    forms: tuple[Form, ...]

    @property
    def triggers(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(dict.fromkeys(t for f in self.forms for t in f.triggers))

    @property
    def starts(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(dict.fromkeys(t for f in self.forms for t in f.starts))

    def block(self, rules: Rules, tools: Sequence[Tool], *, parallel: bool = True) -> str:
        return _either(rules, "form", self._texts(rules, tools, parallel, required=False))

    def required(self, rules: Rules, tools: Sequence[Tool], *, parallel: bool = True) -> str:
        return _either(rules, "required", self._texts(rules, tools, parallel, required=True))

    def _texts(
        self, rules: Rules, tools: Sequence[Tool], parallel: bool, *, required: bool
    ) -> list[str]:
        """Every form's text, a form of forms' own (LFM2's list, Python or JSON) flattened,
        so that forms sharing a marker share it (see _either) however they nest."""
        texts: list[str] = []
        for f in self.forms:
            if isinstance(f, AnyOf):
                texts += f._texts(rules, tools, parallel, required=required)
            elif required:
                texts.append(f.required(rules, tools, parallel=parallel))
            else:
                texts.append(f.block(rules, tools, parallel=parallel))
        return texts

    def json_body(self) -> JsonCall | None:
        return next((b for f in self.forms if (b := f.json_body()) is not None), None)


#: A rule's text that opens with a literal: the literal, and the rest.
_OPENING_LITERAL = re.compile(r'("(?:[^"\\]|\\.)*") (.+)\Z', re.S)


def _either(rules: Rules, prefix: str, texts: list[str]) -> str:
    """One of ``texts``, forms that open with the same literal (a marker two forms share:
    LongCat's JSON or tagged call after ``<longcat_tool_call>``) written once before their
    rests: llguidance's lexer takes the white space after a literal two alternatives share
    for one of them only, and would refuse the other's."""
    groups: dict[str, list[str]] = {}
    for k, text in enumerate(texts):
        m = _OPENING_LITERAL.match(text)
        key, rest = (m.group(1), m.group(2)) if m else (f"#{k}", text)
        groups.setdefault(key, []).append(rest)
    alts: list[str] = []
    for key, rests in groups.items():
        names = [rules.add(f"{prefix}{len(alts)}-{j}", rest) for j, rest in enumerate(rests)]
        either = names[0] if len(names) == 1 else "(" + " | ".join(names) + ")"
        alts.append(either if key.startswith("#") else f"{key} {either}")
    return "(" + " | ".join(alts) + ")"
