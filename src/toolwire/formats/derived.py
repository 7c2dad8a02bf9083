"""A grammar learned from a chat template that no registered family reads.

When no family reads the probe call back, detection renders the conversation once with one
known call and once with two, and learns from the difference where the name and the
arguments go (the way llama.cpp's autoparser diffs renderings). Three payloads are learned:

- ``json``: a JSON object ``{"name": N, "arguments"|"parameters": {...}}`` (alone between an
  opening and a closing text, or as the items of a list after a marker);
- ``name-json``: the name, a separating text, then the arguments as a JSON object
  (``<function=NAME>{...}</function>``);
- ``tags``: the name, then each argument as a key and a text value between learned texts
  (``<parameter=K>V</parameter>``, ``<arg_key>K</arg_key><arg_value>V</arg_value>``).

Around the payload the texts are learned from the two renderings: what opens the calls
(its first word is the marker), what ends each call, what separates two calls and what
closes the block. Learned texts are matched word by word with any whitespace between, so a
model that breaks a line differently is still read. A shape is only claimed when the family
built from it reads both renderings back exactly (:mod:`toolwire.formats.detect` checks), so
nothing here is guessed from the template's source. The reader (:mod:`.shapereader`) has the
guarantees of every family: linear, streaming, bounded, and a call that does not parse stays
text with a notice. The learning itself is in :mod:`toolwire.formats.learn`; a family
declared as a shape, in :mod:`toolwire.formats.syntax`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from . import grammar as g
from .base import Family
from .callshape import CallShape
from .derivedstream import DerivedStream
from .dialects import DIALECTS
from .grammar_literals import Gemma, Pythonic
from .scan import special_words
from .shapereader import CALL_ID, MAX_WORD, NUMBER, Words

__all__ = ["CALL_ID", "MAX_WORD", "NUMBER", "DerivedShape", "DerivedStream", "special_words"]

#: The other key a model writes for a call's arguments (see DerivedShape.call_shape).
_OTHER_ARGS = {"arguments": "parameters", "parameters": "arguments"}


@dataclass(frozen=True)
class DerivedShape:
    """Where a template writes a call's name and arguments, and the texts around them."""

    #: ``json``, ``name-json``, ``name-literal``, ``name-python`` or ``tags`` (see the module
    #: docstring).
    kind: str
    #: The words that open the calls; the first is the marker the reply is scanned for.
    opening: Words
    #: How many of the opening words a model leaves out and still means a call (Qwen3-Coder
    #: writes ``<function=…>`` with no ``<tool_call>``; vLLM and SGLang read it): unless
    #: strict, a call may open at ``opening[left_out]``, read when the closing words of what
    #: was left out confirm it, or, with none of them, when it names a declared tool and the
    #: reply ends or another such call follows (``recovered-unopened-call``).
    left_out: int = 0
    #: The words that end each call.
    post: Words = ()
    #: The words between one call's end and the next call's payload.
    next_call: Words = ()
    #: The words that close the block of calls (none: the block ends after a call).
    trail: Words = ()
    #: The turn's end closes the block too, wherever its closing words were due (a template
    #: that writes one call's block without its trail, as DeepSeek R1's do; Llama 4's list
    #: without its ``<|python_end|>``): no repair, the family's own grammar.
    ends_with_turn: bool = False
    #: The block's closing words may be left out anywhere: text after a call ends the block
    #: and is reply text (Solar Open's ``<|calls|>``, which its template writes to end a turn
    #: of calls; the reply may stop before it).
    trail_optional: bool = False
    #: The opening's word after its marker comes damaged (DeepSeek V4's ``<｜DSML｜toolcalls>``,
    #: a tag that lost its ``>``, a stray ``<｜DSML｜ word>`` line), as SGLang reads it: unless
    #: strict, the rest of that line is read past when the marker comes again right after it
    #: with the block, or a call with the block left out (``recovered-misspelt-tag``).
    damaged_opening: bool = False
    #: ``name-python`` and ``tags``: a call may also be a JSON object (``name_key``,
    #: ``args_key``) where one is due, its first character deciding (LFM2 writes its list
    #: either way, one list one way; K2 Horizon each call in its tags either way).
    json_too: bool = False
    #: ``json``: the keys of the name and the arguments, and keys with a fixed text.
    name_key: str = "name"
    args_key: str = "arguments"
    #: ``json``: other keys the family writes the arguments under, as much its own.
    args_also: tuple[str, ...] = ()
    constants: tuple[tuple[str, str], ...] = ()
    #: ``name-json`` and ``tags``: the words from the last opening word to the number after
    #: the name are the call's id, kept as the model wrote it (Kimi K2's
    #: ``functions.NAME:0``, from which its templates read a call's tool back). A call whose
    #: name is left out there, only its number written, is named by its arguments (see
    #: :mod:`.namedby`).
    id_words: bool = False
    #: ``json``: keys a call object may hold besides, each only with this text, never
    #: written (Llama 3's ``"type": "function"``, which its template does not write).
    allowed: tuple[tuple[str, str], ...] = ()
    #: ``json``: keys holding a text that differs from call to call (an id).
    strings: tuple[str, ...] = ()
    #: ``json``: the key of the model's own call id, kept when the model writes it before the
    #: name (a call is announced at its name); ``id_first``: the family writes it first.
    id_key: str = ""
    id_first: bool = False
    #: ``json``: the call is ``{NAME: {...}}``, the name the one key, holding the arguments.
    name_is_key: bool = False
    #: ``name-json`` and ``tags``: the words after the name.
    name_end: Words = ()
    #: ``tags``: the words before a key, between key and value, and after a value, and the
    #: whitespace the template writes around a value (dropped once, when the model writes it).
    key_open: Words = ()
    key_mid: Words = ()
    value_end: Words = ()
    value_lead: str = ""
    value_tail: str = ""
    #: ``name-literal``: the dialect of the literal mapping after the name
    #: (:data:`~.dialects.DIALECTS`: ``gemma``'s ``{key:<|"|>text<|"|>,n:3}``, …);
    #: ``name-python``: ``json`` where the template writes each value through ``tojson``
    #: (the grammar and the writer follow it; the reader takes Python's and JSON's literals).
    literal: str = ""
    #: ``tags``: a value may be nested elements keyed by name (MiniMax M3's objects and lists,
    #: :mod:`.elements`); a value's closing tag names its key (``{key}`` in ``value_end``).
    nested: bool = False
    #: ``tags``: the family wraps a string value in ``<![CDATA[…]]>`` (one holding ``<``, ``&``
    #: or a line break): its inside is the value, whatever it holds.
    cdata: bool = False
    #: ``tags``: a value is its text exactly, quotes and all, where the family's peers keep a
    #: quoted value quoted (Qwen XML: llama.cpp's tests); the argument pipeline types it by
    #: the tool's schema. Else a value written as JSON is read as what it stands for.
    verbatim: bool = False
    #: ``tags``: the attribute of a value's tag that types it, ``string="true"`` (the value
    #: is its text exactly) or ``"false"`` (JSON, read as what it stands for): the grammar's
    #: own, read with no notice (DeepSeek V3.2's ``string``). Any other attribute there is
    #: read past as ever, named.
    type_attr: str = ""
    #: ``tags``: the tags around a value's type written between its key's last two words
    #: (K2 Horizon's ``<ifm|arg_type>string</ifm|arg_type>``), where written: ``string`` is
    #: text exactly, any other type JSON; the grammar's own, read with no notice.
    type_tag: Words = ()
    #: ``json``: names the template gives a pseudo-tool that is no call (Command R+'s
    #: ``directly-answer``, for "answer in text"): an item naming one is left out of the
    #: calls, and a block of nothing else is the model choosing to answer in text (a
    #: ``directly-answer`` notice), unless the caller declared a tool of that name.
    no_tools: tuple[str, ...] = ()
    #: ``name-json`` and the other name kinds: names that address the user, not a tool
    #: (Functionary v3.2's ``all``): the words after such a name end the block, and what
    #: follows is reply text, unless the caller declared a tool of that name.
    text_recipients: tuple[str, ...] = ()
    #: ``code``: the one tool this form calls and the argument its code goes in
    #: (Functionary v3.1's ``<|python_tag|>`` code, ``("python", "code")``): the text after
    #: the opening words, up to the first of ``post`` or the reply's end (:mod:`.codesteps`).
    code: tuple[str, str] = ("", "")
    #: The form's block is the whole reply, with no marker (Llama 3's JSON object, Llama 4's
    #: Python list, a bare JSON list): it opens only where the reply starts (after white
    #: space), at its first word (a call object itself where there are none), its calls
    #: must name declared tools when the tools are known, and text after it (but white
    #: space and the turn's end tokens) makes the whole reply text (:mod:`.wholereply`).
    whole: bool = False
    #: The family's templates write this form: the writer and the grammar take it. A form
    #: only read (a tolerance, as Llama 4's list without its brackets) is not written.
    written: bool = True
    #: A form only read as a named repair (LFM2's list without its ``<|tool_call_start|>``):
    #: a block read in it is named with this notice, and strict reading does not read it.
    repair: str = ""

    def call_shape(self, strict: bool, known: bool) -> CallShape:
        """What a call object in this ``json`` shape (or ``json_too``) may hold, read
        ``strict`` or not, the tools ``known`` or not."""
        # a behaviour of every JSON syntax: the other key models write for the arguments
        # (``parameters`` for ``arguments``, and back), unless strict, named
        keys = (self.args_key, *self.args_also)
        other = _OTHER_ARGS.get(self.args_key, "")
        other = "" if other in keys or strict else other
        return CallShape(
            name_key=self.name_key,
            args_keys=(*keys, other) if other else keys,
            args_repair=other,
            args_alike=True,
            constants=dict(self.constants) | dict(self.allowed),
            strings=frozenset(self.strings),
            id_key=self.id_key,
            name_is_key=self.name_is_key,
            no_tools=frozenset(self.no_tools),
            # a whole reply's call: nothing but a declared name says it is one
            declared_only=self.whole and known,
            # a behaviour of every JSON syntax, learned or declared: arguments encoded
            # twice are read (a named repair; strict refuses it)
            args_in_string=True,
        )

    @property
    def marker(self) -> str:
        """The word the reply is scanned for (a whole reply's call object: its brace)."""
        if self.opening:
            return self.opening[0]
        return "{" if self.kind == "json" else ""  # (a name kind's: any name, see .wholereply)

    @property
    def typed_mid(self) -> Words:
        """The words between a key and its value, with the value's type in them where the
        shape types its values in an attribute (``type_attr``; ``{type}`` its text)."""
        if self.type_attr and self.key_mid and self.key_mid[0].startswith('"'):
            head = self.key_mid[0]
            return (f'"{head[1:-1]} {self.type_attr}="{{type}}"{head[-1]}', *self.key_mid[1:])
        return self.key_mid

    @property
    def plain_marker(self) -> bool:
        """The marker is a plain word prose may hold (Command R+'s ``Action:``), with more
        opening words after it: only the next one makes it a call. A block whose marker that
        word does not follow is prose (given back with no notice); a grammar waits for it."""
        return len(self.opening) > 1 and not special_words((self.marker,))

    @property
    def trigger(self) -> str:
        """What a lazy grammar waits for: the marker, or a plain marker with the opening
        word after it, any white space between (``{space}``, :mod:`.gbnf`)."""
        if self.plain_marker:
            return self.marker + "{space}" + self.opening[1]
        if self.text_recipients:  # the marker opens text too: a declared name makes a call
            return "".join((*self.opening, "{name}", *self.name_end))
        return self.marker

    def describe(self) -> str:
        """The shape written out with placeholders, for labels and ``detect --json``."""
        if self.kind == "json" and self.name_is_key:
            payload = "{NAME: {...}}"
        elif self.kind == "json":
            payload = f'{{"{self.name_key}": NAME, "{self.args_key}": {{...}}}}'
        elif self.kind in ("name-json", "name-literal"):
            payload = "NAME" + " ".join(self.name_end) + "{...}"
        elif self.kind == "name-python":
            payload = "NAME(key=value, ...)"
        elif self.kind == "code":
            payload = "CODE"
        else:
            arg = " ".join(self.key_open) + "KEY" + " ".join(self.key_mid) + "VALUE"
            payload = "NAME" + " ".join(self.name_end) + arg + " ".join(self.value_end) + "..."
        one = " ".join(self.opening) + payload + " ".join(self.post)
        more = " ".join(self.next_call) + "..." + " ".join(self.post) + " ".join(self.trail)
        return f"{one} {more}".strip().replace(NUMBER, "0").replace(CALL_ID, "ID")

    @property
    def _starts(self) -> tuple[str, ...]:
        """What says a whole reply's calls have begun, at its start (``{name}``: a declared
        tool's name): a Python call's name and parenthesis, a listed call object's name (a
        bare call object's the grammar knows itself)."""
        if not self.whole:
            return ()
        if self.kind == "name-python":
            return (self.marker + "{name}(",)
        return (self.marker + '{"' + self.name_key + '": "{name}"',) if self.opening else ()

    @cached_property
    def grammar(self) -> g.Form:
        """The shape's call form (:mod:`toolwire.formats.grammar`): the learned words, white
        space allowed between them as the reader allows it."""
        body: g.Body
        extra = tuple((key, '"\\"" [^"\\\\]{0,64} "\\""') for key in self.strings)
        extra += tuple((key, g.lit(json.dumps(value))) for key, value in self.constants)
        if self.kind == "json":
            body = g.JsonCall(
                self.name_key,
                self.args_key,
                name_is_key=self.name_is_key,
                id_key=self.id_key or None,
                id_first=self.id_first,
                extra=extra,
            )
        elif self.kind == "name-json":
            # the learned reader takes white space between any two words, the name's too
            body = g.NamedJson(before="space", between="space " + _words(self.name_end))
        elif self.kind == "name-literal":
            body = Gemma(prefix="", quote=DIALECTS[self.literal].string_delimiter)
        elif self.kind == "name-python":
            body = Pythonic(json_values=self.literal == "json")
        else:
            escaped = [
                tuple(
                    w.replace("{", "{{")
                    .replace("}", "}}")
                    .replace("{{type}}", "{type}")
                    .replace("{{key}}", "{key}")
                    for w in words
                )
                for words in (self.key_open, self.typed_mid, self.value_end)
            ]
            typed = self.typed_mid != self.key_mid
            body = g.Tagged(
                "space",
                "space " + _words(self.name_end),
                '""',
                arg_open=(*escaped[0], "{key}", *escaped[1]),
                arg_close=escaped[2],
                types=(("string", "true"), ("*", "false")) if typed else (),
                arg_type=self.type_tag,
                # a template that writes a line break each side of a value (Qwen's): the
                # value has no white space at its ends, and none of the form's tags;
                # else the learned white space around a value is the template's
                trim=self.value_lead == self.value_tail == "\n",
                markup=tuple(
                    w
                    for words in (self.opening, self.post, self.next_call, self.trail)
                    for w in words
                    if w.strip() and w not in (NUMBER, CALL_ID)
                ),
            )
        bodies: list[g.Body] = [body]
        if self.json_too and self.kind == "tags":  # each call in its framing either way
            bodies = [g.EitherBody(body, g.JsonCall(self.name_key, self.args_key))]
        elif self.json_too:  # the same framing around JSON call objects (one list one way)
            bodies.append(g.JsonCall(self.name_key, self.args_key))
        forms = [
            g.CallForm(
                each,
                open=_words(self.opening),
                call_close=_words(self.post),
                # calls one after another, nothing closing them: ``;`` may part two (Llama 3)
                sep=(
                    '";"?'
                    if self.kind == "json" and not (self.next_call or self.post or self.trail)
                    else _words(self.next_call)
                ),
                close=(
                    f"({_words(self.trail)})?"
                    if self.ends_with_turn or self.trail_optional
                    else _words(self.trail)
                ),
                # a whole reply's form starts the calls only at the reply's start
                triggers=() if self.whole else (self.trigger,),
                starts=self._starts,
            )
            for each in bodies
        ]
        return forms[0] if len(forms) == 1 else g.AnyOf(tuple(forms))

    @cached_property
    def family(self) -> Family:
        """The family reading replies in this shape (built once per shape)."""
        stream = type("DerivedStream", (DerivedStream,), {"marker": self.marker, "shape": self})
        derived: type[Family] = type(
            "Derived",
            (Family,),
            {
                "name": "derived",
                "label": f"derived from the template: {self.describe()}",
                "markers": (self.marker,),
                "stream_class": stream,
                "grammar": self.grammar,
                # ids of nine letters and digits suit every template (Mistral's demand them);
                # an unknown template is given the ids every template accepts
                "call_ids": "alnum9",
            },
        )
        return derived()

    def to_json(self) -> dict[str, Any]:
        """The shape as plain data, for ``detect --json``."""
        out: dict[str, Any] = {"kind": self.kind, "describe": self.describe()}
        for key in ("opening", "post", "next_call", "trail", "name_end"):
            out[key] = list(getattr(self, key))
        out["ends_with_turn"] = self.ends_with_turn
        out["trail_optional"] = self.trail_optional
        out["left_out"] = self.left_out
        if self.kind == "json":
            out.update(name_key=self.name_key, args_key=self.args_key)
            out.update(id_key=self.id_key, id_first=self.id_first, name_is_key=self.name_is_key)
            out["constants"] = dict(self.constants)
            out["strings"] = list(self.strings)
        if self.kind in ("name-literal", "name-python"):
            out["literal"] = self.literal
        if self.kind == "tags":
            for key in ("key_open", "key_mid", "value_end"):
                out[key] = list(getattr(self, key))
            out["cdata"] = self.cdata
            out["verbatim"] = self.verbatim
        return out


def _words(words: Words) -> str:
    """Learned words as GBNF: white space between them, the call's number as digits."""
    slots = {NUMBER: "[0-9]{1,4}", CALL_ID: "[A-Za-z0-9_-]{1,40}"}
    parts = [slots.get(w) or g.lit(w) for w in words if w]
    return " space ".join(parts) or '""'
