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

#: White space between JSON tokens and around tags, as templates write it (spaces, a line
#: break and its indent, or both): bounded, so it cannot run on.
SPACE = '| [ \\t]{1,20} ("\\n"{1,2} [ \\t]{0,20})? | "\\n"{1,2} [ \\t]{0,20}'
#: A character of a JSON string, as JSON has it.
_JSON_CHAR = (
    '[^"\\\\\\x00-\\x1F\\x7F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] '
    "[0-9a-fA-F] [0-9a-fA-F])"
)
#: A call id a model writes (Mistral's nine letters and digits, Solar's, Cohere's index).
_ID = "[A-Za-z0-9_-]{1,40}"


def lit(text: str) -> str:
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


def words(texts: Sequence[str]) -> str:
    """Texts one after another, white space allowed between them."""
    return " space ".join(lit(t) for t in texts if t) or '""'


def _unlit(fragment: str) -> str:
    """The text of a GBNF fragment that is one literal (else "")."""
    if re.fullmatch(r'"(?:[^"\\]|\\.)*"', fragment):
        try:
            return str(json.loads(fragment))
        except ValueError:
            return ""
    return ""


def cat(*parts: str) -> str:
    """GBNF fragments one after another, white space allowed between them; an empty
    fragment (``""``) is left out, and a leading ``""`` stands for white space before."""
    kept = [p for p in parts if p and p != '""']
    lead = "space " if parts and parts[0] == "" else ""
    return lead + (" space ".join(kept) or '""')


def _class_char(ch: str) -> str:
    if ch in "\\]-^[":
        return f"\\x{ord(ch):02X}"  # the escape both llama.cpp and llguidance read
    return lit(ch)[1:-1]


class Rules:
    """The rules of one grammar being built: llama.cpp's schema converter for JSON values,
    and the rules the forms add (raw text, Python and Gemma values)."""

    def __init__(self) -> None:
        from llama_cpp.llama_grammar import SchemaConverter

        self.conv: Any = SchemaConverter(  # type: ignore[no-untyped-call]
            prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False
        )
        self._until: dict[str, str] = {}
        #: The texts of the form being built (its tags and markers): never a value's text.
        self.markup: tuple[str, ...] = ()

    def add(self, name: str, rule: str) -> str:
        """Add a rule (renamed if the name is taken by another); its name."""
        return str(self.conv._add_rule(name, rule))  # the converter's own way to add a rule

    def arguments(self, params: Mapping[str, Any], name: str) -> str:
        """The rule for a tool's arguments object: its schema, converted; any JSON object when
        the converter cannot take it. No key beyond the declared ones, unless it says so."""
        schema: dict[str, Any] = dict(params) if params else {"type": "object"}
        if schema.get("type", "object") == "object" and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
        return self.value(schema, name, fallback={"type": "object"})

    def value(self, schema: Mapping[str, Any], name: str, *, fallback: Any = None) -> str:
        """The rule for one JSON value of ``schema``; any JSON value when it cannot be had."""
        try:
            resolved = self.conv.resolve_refs(dict(schema), "")
            return str(self.conv.visit(resolved, name))
        except Exception:
            return str(self.conv.visit(fallback or {}, name + "-any"))

    def through(self, closer: str) -> str:
        """Raw text up to and with the first ``closer`` (the text that ends it)."""
        return self.value_text(closer, (), trim=False)

    def trimmed(self, closer: str, markup: Sequence[str] = ()) -> str:
        """Like :meth:`through`, with no white space at the value's ends but one line break
        each side (as Qwen's template writes ``<parameter=K>\\nV\\n</parameter>``: under a
        grammar a model would indent a value, and the indent would be its text), and none of
        ``markup`` inside (the form's own tags: a value holding them would be read as them)."""
        return self.value_text(closer, tuple(markup), trim=True)

    def value_text(self, closer: str, markup: tuple[str, ...], *, trim: bool) -> str:
        """The matcher of a raw value and its ``closer``, a character at a time (so that no
        engine's lexer takes a character of the value for the start of the closer), as
        rules: each state is the text matched so far of the closer or of a ``markup`` text,
        and what comes before it (``S`` the start, ``F`` after a first line break, ``N``
        after text, ``L`` after text and a line break, ``W`` after other white space, where
        the closer may not come when ``trim``)."""
        key = f"{trim}:{closer}:" + "\x00".join(markup)
        if key in self._until:
            return self._until[key]
        base = f"raw{len(self._until)}"
        # a tag of the form's is refused however it ends (``</tool_call >``); the closer's
        # own name, once written, ends only as the closer (``</parameter name>`` is no value)
        stems = [m[:-1] for m in markup if m.endswith(">") and len(m) > 2]
        forbidden = [m for m in (*markup, *stems) if m and not closer.startswith(m)]
        patterns = (closer, *dict.fromkeys(forbidden))
        stem = closer[:-1] if trim and closer.endswith(">") and len(closer) > 2 else ""
        blanks = " \t\n\r"
        alphabet = sorted(set("".join(patterns)) | set(blanks))
        prefixes = {p[:k] for p in patterns for k in range(len(p))} | {stem}

        def plain(cls: str | None, ch: str) -> str | None:
            if cls is None:
                return None
            if ch not in blanks:
                return "N"
            if not trim:
                return "W"
            if cls == "S":
                return "F" if ch == "\n" else None
            if cls == "F":
                return None
            # line breaks after text: a value may end with its own (a file's last line)
            return "L" if cls in ("N", "L") and ch == "\n" else "W"

        def move(state: tuple[str, str], ch: str) -> tuple[str, str] | str | None:
            cls, seen = state
            if stem and seen.endswith(stem) and ch != closer[-1]:
                return None
            text = seen + ch
            if any(text.endswith(m) for m in patterns[1:]):
                return None
            if text.endswith(closer):
                start = len(text) - len(closer)
                for c in text[:start]:
                    cls = plain(cls, c)  # type: ignore[assignment]
                return "end" if cls is not None and (cls != "W" or not trim) else None
            keep = next(k for k in range(len(text), -1, -1) if text[len(text) - k :] in prefixes)
            after: str | None = cls
            for c in text[: len(text) - keep]:
                after = plain(after, c)
            return None if after is None else (after, text[len(text) - keep :])

        names: dict[tuple[str, str], str] = {}
        todo = [("S", "")]
        names[todo[0]] = f"{base}-0"
        rules: list[tuple[str, str]] = []
        while todo:
            state = todo.pop()
            # the characters that lead to one state, as one class
            groups: dict[str, list[str]] = {}
            for ch in [*alphabet, "\x00"]:
                to = move(state, ch)
                if to is None:
                    continue
                target = ""
                if isinstance(to, tuple):
                    if to not in names:
                        names[to] = f"{base}-{len(names)}"
                        todo.append(to)
                    target = names[to]
                groups.setdefault(target, []).append(ch)
            alts = []
            for target, chars in groups.items():
                if "\x00" in chars:
                    left = [c for c in alphabet if c not in chars]
                    piece = "[^" + "".join(_class_char(c) for c in left) + "]"
                else:
                    piece = "[" + "".join(_class_char(c) for c in chars) + "]"
                alts.append(f"{piece} {target}".strip())
            rules.append((names[state], " | ".join(alts) or '"\\x00"'))
        for rule_name, rule in rules:
            self.add(rule_name, rule)
        self._until[key] = f"{base}-0"
        return self._until[key]

    def rules(self) -> dict[str, str]:
        out: dict[str, str] = dict(self.conv._rules)
        # white space as models write JSON: none, a space, or a new line and its indent
        out["space"] = SPACE
        if "char" in out:
            # a JSON string holds no raw control character (the converter's port lets them
            # in; a reader would have to tolerate them)
            out["char"] = _JSON_CHAR
        return out


def schema_type(schema: Mapping[str, Any]) -> str:
    """A property's JSON type, ``string`` when it names none it can be told by."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind is None and "enum" in schema:
        values = schema["enum"]
        kind = "string" if values and all(isinstance(v, str) for v in values) else None
    if kind is None and "const" in schema:
        kind = "string" if isinstance(schema["const"], str) else None
    return kind if isinstance(kind, str) else "any"


def properties_of(params: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], bool]]:
    props = params.get("properties")
    required = params.get("required") or ()
    if not isinstance(props, Mapping):
        return []
    return [
        (key, value if isinstance(value, Mapping) else {}, key in required)
        for key, value in props.items()
    ]


def sequence_of(items: Sequence[tuple[str, bool]], sep: str) -> str:
    """Items in order, each optional or not, ``sep`` (a GBNF fragment, or none) between two
    that are written; white space around each."""

    def rest(i: int) -> str:
        parts = []
        for item, required in items[i:]:
            piece = f"space {sep} space {item}" if sep else f"space {item}"
            parts.append(piece if required else f"({piece})?")
        return " ".join(parts)

    def first(i: int) -> tuple[str, bool]:
        """The items from ``i`` with none written before; whether it may be empty."""
        if i == len(items):
            return "", True
        item, required = items[i]
        head = f"{item} {rest(i + 1)}".strip()
        if required:
            return head, False
        after, empty = first(i + 1)
        if not after:
            return f"({head})?", True
        return f"(({head}) | {after})" + ("?" if empty else ""), empty

    out, _ = first(0)
    return out or '""'


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
                        _unlit(self.after),
                    )
                    raw = rules.trimmed(closer[0], [t for t in tags if not closer[0].startswith(t)])
                else:
                    raw = rules.through(closer[0])
                value = f"{raw} space {words(closer[1:])}"
            else:
                scalar = _TAG_BOOL if kind == "boolean" else rules.value(schema, f"tool{i}-{key}")
                value = f"space {scalar} space {words(closer)}"
            head = words(opener)
            if self.arg_type:  # the value's type, written or not
                kind_tag = words((self.arg_type[0], kind, self.arg_type[1]))
                head = f"{words(opener[:-1])} (space {kind_tag})? space {words(opener[-1:])}"
            rule = rules.add(f"tool{i}-arg-{key}", f"{head} {value}")
            items.append((rule, required))
        args = sequence_of(items, "")
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
    nothing but its calls (the rest of a message header)."""

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
        texts = (self.open, self.close, self.call_open, self.call_close, self.sep)
        rules.markup = (*self.triggers, *(t for t in map(_unlit, texts) if t.strip()))
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
