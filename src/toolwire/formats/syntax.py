"""A family as one syntax value: everything else about it is derived, never listed.

A :class:`Syntax` says how a family writes its calls — the framing (what opens the calls,
ends each, separates two and closes the block), how a name and its arguments are written
(:class:`~toolwire.formats.derived.DerivedShape`'s payloads: a JSON object, a name then a
JSON object, a name then tagged arguments), the call ids its templates expect, its
reasoning tags and its end-of-turn tokens. One engine derives from it:

- the streaming reader (the derived shape's, :class:`~toolwire.formats.derived.DerivedStream`:
  linear, chunking-invariant, bounded, a call that does not parse stays text with a notice);
- the constraint grammar (:attr:`DerivedShape.grammar`);
- the writer (:meth:`Syntax.write`: a call in the family's own syntax, for sample replies
  and for the calls written back into a prompt);
- the markers, triggers and kept tokens (the opening's first word; every framing word that
  looks like a special token).

A learned template and a declared family are the same thing: learning (:mod:`.learn`)
produces the shape; a declaration gives it a name, a label naming its models, its tags and
tokens. Families are moved here one at a time (:data:`DECLARED`): each runs beside its
hand-written reader over every corpus (``tests/test_declared.py``) and replaces it only when
the two agree event for event, notices included.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ..templates.shaping import CallIds
from .base import Family
from .derived import CALL_ID, NUMBER, DerivedShape, DerivedStream, special_words
from .derivedstream import TurnOpener
from .dialects import DIALECTS
from .fences import QuotedInFences
from .grammar import AnyOf, CallForm, Form
from .markerstream import MarkerStream
from .reasoning import ReasoningTags
from .samples import Sample
from .wholereply import WholeReply

__all__ = ["TOOL_RESPONSE", "Syntax", "special_words"]


#: How Qwen's and Hermes' templates, and many after them, frame a tool's result.
TOOL_RESPONSE = (("<tool_response>", "</tool_response>"),)


class _OnUse:
    """A family's attribute made the first time it is read: its stream class (the markers,
    forms and echoes of its reader) and its grammar. Making them for every family when the
    families are declared was most of the start-up of a command that reads one family's
    reply. Made under a lock: every reader of a family shares one class."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make: Callable[[], Any] | None = make
        self._made: Any = None
        self._lock = threading.Lock()

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if self._make is not None:
            with self._lock:
                if self._make is not None:
                    self._made = self._make()
                    self._make = None
        return self._made


@dataclass(frozen=True)
class Syntax:
    """One family, declared (see the module's doc)."""

    name: str
    #: What the family is, its models in closing parentheses (``toolwire families``).
    label: str
    shape: DerivedShape
    #: The family's other forms, each a shape of its own (GigaChat 3's call message beside
    #: 3.1's call token): the same stream reads them all, the word opening a block choosing
    #: its form; the grammar takes any, and the writer writes each (a sample per form).
    also: tuple[DerivedShape, ...] = ()
    reasoning: ReasoningTags = field(default_factory=ReasoningTags)
    end_tokens: tuple[str, ...] = ()
    #: Tokens that end a message whose turn goes on with the calls' results (Llama 4's
    #: ``<|eom|>`` after its calls): where the reply ends, where it stopped, not text, as an
    #: end token; not the end of a turn a template's analysis looks for (other families
    #: write the same token between the messages of one turn).
    message_ends: tuple[str, ...] = ()
    call_ids: CallIds = "keep"
    #: The templates render one call per assistant message (see ``Family``).
    one_call_per_message: bool = False
    #: Texts that mark a prompt stating this format in words (see ``Family.prompt_markers``).
    prompt_markers: tuple[str, ...] = ()
    #: A stream layer before the engine's stream, for what is no call syntax but the
    #: family's own (Gemma's thinking channel, :mod:`.gemma_channel`): it drops the
    #: family's tokens from the text.
    stream_layer: type[MarkerStream] | None = None
    #: The family's markup inside a ``` or ``~~~`` code fence is quoted prose, never a
    #: call (:mod:`.fences`).
    quoted_in_fences: bool = False
    #: The template's own turn opener, dropped where a reply opens with it (a reader of the
    #: raw output sees it: Command R+'s ``<|CHATBOT_TOKEN|>``); a token the family keeps.
    turn_opener: str = ""
    #: The template's generation prompt ends with the marker (Functionary v3.2's ``>>>``):
    #: a reply starts as if the model had just written it, a call there only when a
    #: declared tool's name and its arguments follow (else the reply is prose, no notice),
    #: and the grammar may start the calls at the reply's first token.
    primed: bool = False
    #: How the family's template frames a tool's result, (opener, closer) each: a model that
    #: writes one itself has it dropped, never shown nor believed (:mod:`.echoes`).
    tool_outputs: tuple[tuple[str, str], ...] = ()

    @property
    def writes(self) -> tuple[DerivedShape, ...]:
        """The forms the family's templates write, each writing any call (a ``code`` form
        writes one tool's code only; a form only read, none)."""
        return tuple(s for s in self.forms if s.kind != "code" and s.written)

    @property
    def forms(self) -> tuple[DerivedShape, ...]:
        """Every form of the family, its main one first."""
        return (self.shape, *self.also)

    @cached_property
    def markers(self) -> tuple[str, ...]:
        """What a reply is scanned for: each form's opening's first word (and the turn
        opener it drops)."""
        found = [s.marker for s in self.forms] + ([self.turn_opener] if self.turn_opener else [])
        return tuple(dict.fromkeys(m for m in found if m))  # (a bare name opens none)

    @cached_property
    def kept_tokens(self) -> tuple[str, ...]:
        """The special tokens a call is written with beyond its marker: the framing's and the
        payload's words that read as special tokens (the engine must keep them in the text
        it generates, or the calls cannot be read)."""
        words: tuple[str, ...] = ()
        for s in self.forms:
            words += (*s.opening, *s.post, *s.next_call, *s.trail, *s.name_end)
            words += (*s.key_open, *s.key_mid, *s.value_end, *s.type_tag)
            if s.kind == "name-literal":  # the literal's string delimiter (Gemma's <|"|>)
                words += (DIALECTS[s.literal].string_delimiter,)
        return tuple(w for w in special_words(words) if w not in self.markers)

    def write(self, name: str, arguments: Mapping[str, Any], index: int = 0, form: int = 0) -> str:
        """One call in this syntax (its ``form``), a block of its own, as a model trained on
        it writes it (the framing's words one a line, where the reader takes any white space)."""
        return self.reply([(name, arguments)], index, form)

    def reply(
        self, calls: list[tuple[str, Mapping[str, Any]]], first: int = 0, form: int = 0
    ) -> str:
        """A whole reply of these calls (numbered from ``first``) in the family's ``form``:
        the first opened by the opening, the others by the words between two calls, the block
        closed by its trail."""
        s = self.forms[form]
        out = ""
        for index, (name, arguments) in enumerate(calls, first):
            lead = s.opening if index == first else s.next_call
            # a JSON object on a line of its own; a name right after the words before it
            line = "\n" if s.kind == "json" or not (s.next_call or s.post) else ""
            call = _joined(lead) + line + _payload(s, name, arguments, index)
            call += (line + _joined(s.post)) if s.post else ""
            out += call.replace(CALL_ID, f"call_{index}")
        return (out + ("\n" + _joined(s.trail) if s.trail else "")).replace(NUMBER, str(first))

    @cached_property
    def family(self) -> Family:
        """The family this syntax derives: reader, grammar, writer, markers and tokens."""
        layers: tuple[type[MarkerStream], ...] = ()
        layers += (self.stream_layer,) if self.stream_layer is not None else ()
        layers += (TurnOpener,) if self.turn_opener else ()
        layers += (QuotedInFences,) if self.quoted_in_fences else ()
        layers += (WholeReply,) if any(f.whole for f in self.forms) else ()
        syntax = self

        def stream() -> type[MarkerStream]:
            return type(
                f"{_title(syntax.name)}Stream",
                (*layers, DerivedStream),
                # the end tokens at the reply's very end: where the turn stopped, not text
                {
                    "marker": syntax.shape.marker,
                    "shape": syntax.shape,
                    "forms": syntax.also,
                    "turn_ends": (*syntax.end_tokens, *syntax.message_ends),
                    "turn_opener": syntax.turn_opener,
                    "primed": syntax.primed,
                    "tool_outputs": syntax.tool_outputs,
                },
            )

        def sampler(form: int) -> Sample:
            def sample(name: str, args: Mapping[str, Any], index: int) -> str:
                return syntax.write(name, args, index, form)

            return sample

        made: type[Family] = type(
            _title(self.name),
            (Family,),
            {
                "name": self.name,
                "label": self.label,
                "markers": self.markers,
                "stream_class": _OnUse(stream),
                "grammar": _OnUse(lambda: syntax.grammar),
                "call_ids": self.call_ids,
                "one_call_per_message": self.one_call_per_message,
                "reasoning": self.reasoning,
                "end_tokens": self.end_tokens,
                "kept_tokens": self.kept_tokens,
                "prompt_markers": self.prompt_markers,
                "samples": tuple(
                    sampler(form) for form, s in enumerate(self.forms) if s in self.writes
                ),
                "drops_tokens": self.stream_layer is not None or bool(self.turn_opener),
            },
        )
        return made()

    @cached_property
    def grammar(self) -> Form:
        """Every form's grammar (a ``code`` form's text is free: none), and with a primed
        marker the calls' form from the reply's first token too."""
        forms: list[Form] = [f.grammar for f in self.writes]
        if self.primed and isinstance(forms[0], CallForm):
            start = "".join(("{name}", *self.shape.name_end))
            forms.append(replace(forms[0], open='""', triggers=(), starts=(start,)))
        return forms[0] if len(forms) == 1 else AnyOf(tuple(forms))


def _payload(s: DerivedShape, name: str, arguments: Mapping[str, Any], index: int) -> str:
    """A call's name and arguments, as the shape writes them."""
    if s.kind == "json" and s.name_is_key:
        return json.dumps({name: dict(arguments)}, ensure_ascii=False)
    if s.kind == "json":
        obj: dict[str, Any] = {s.id_key: str(index)} if s.id_key and s.id_first else {}
        obj.update({s.name_key: name, s.args_key: dict(arguments)})
        obj.update(dict(s.constants))
        obj.update({key: f"call_{index}" for key in s.strings})
        if s.id_key and not s.id_first:
            obj[s.id_key] = f"call_{index}"
        return json.dumps(obj, ensure_ascii=False)
    if s.kind == "name-json":
        return _joined((name, *s.name_end)) + json.dumps(dict(arguments), ensure_ascii=False)
    if s.kind == "name-python" and s.literal == "json":  # each value as tojson writes it
        args = ",".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
        return f"{_joined((name, *s.name_end))}({args})"
    if s.kind == "name-python":
        args = ", ".join(f"{k}={_python(v)}" for k, v in arguments.items())
        return f"{_joined((name, *s.name_end))}({args})"
    if s.kind == "name-literal":
        quote = DIALECTS[s.literal].string_delimiter
        # keys sorted, as Gemma's templates write them (``dictsort``) and its grammar takes
        return _joined((name, *s.name_end)) + _literal(dict(sorted(arguments.items())), quote)
    parts = [_joined((name, *s.name_end))]
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if s.cdata and isinstance(value, str) and any(c in value for c in "<&\n"):
            text = f"<![CDATA[{value}]]>"
        kind = "true" if isinstance(value, str) else "false"
        parts.append(
            _joined(s.key_open)
            + key
            + _joined(s.typed_mid).replace("{type}", kind)
            + s.value_lead
            + text
            + s.value_tail
            + _joined(s.value_end).replace("{key}", key)
        )
    return "".join(parts)


def _joined(words: tuple[str, ...]) -> str:
    """Words as a model writes them: a space where two would otherwise run into one
    (``<invoke`` ``name="``), nothing between a tag and what follows it."""
    out = ""
    for word in words:
        if out and _WORDY.match(out[-1]) and word and _WORDY.match(word[0]):
            out += " "
        out += word
    return out


_WORDY = re.compile(r"\w")


def _python(value: Any) -> str:
    """``value`` as a Python literal (``True``, ``None``, quoted strings, nested)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_python(k)}: {_python(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_python(v) for v in value) + "]"
    return repr(value)


def _literal(value: Any, quote: str) -> str:
    """``value`` in Gemma's literal syntax, strings between ``quote``: keys bare, nested."""
    if isinstance(value, str):
        return quote + value + quote
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_literal(v, quote)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_literal(v, quote) for v in value) + "]"
    return json.dumps(value)


def _title(name: str) -> str:
    return "".join(part.title() for part in re.split(r"[^A-Za-z0-9]+", name) if part)
