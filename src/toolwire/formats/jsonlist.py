"""The families that write a marker, then a JSON list of call objects, then maybe an end marker.

One grammar, each family's differences as data (:class:`ListGrammar`):

- Granite 3.3: ``<|tool_call|>[{"name": NAME, "arguments": {...}}, ...]``
- Nemotron Nano v2: ``<TOOLCALL>[{"name": NAME, "arguments": {...}}, ...]</TOOLCALL>``
- Apriel 1.5/1.6: ``<tool_calls>[{"name": NAME, "arguments": {...}}, ...]</tool_calls>``
- Apertus: ``<|tools_prefix|>[{NAME: {...}}, ...]<|tools_suffix|>``
- Firefunction v2: ``functools[{"name": NAME, "arguments": {...}}, ...]``
- Command R7B / Cohere2: ``<|START_ACTION|>[{"tool_call_id": "0", "tool_name": NAME,
  "parameters": {...}}, ...]<|END_ACTION|>``

Text may come before the marker. Each call is announced as soon as its name is read and its
argument text passed on as written; the list must hold at least one call, every item must be
a call in the family's shape, and a family with an end marker must write it after the list.
Anything else is reply text, with a ``call-not-read`` notice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from . import grammar_forms as forms
from .base import Family
from .callshape import CallShape
from .jsoncall import JsonCall
from .markerstream import DONE, WS, Body, MarkerStream

__all__ = ["Apertus", "Apriel", "CommandR7B", "Firefunction", "Granite", "NemotronV2"]

_OPEN, _ITEM_WAIT, _ITEM, _NEXT, _END = range(5)


@dataclass(frozen=True)
class ListGrammar:
    """What one family writes around its list of calls."""

    #: The text that opens the list; it may end with the list's ``[`` itself.
    marker: str
    #: The shape of each item.
    item: CallShape
    #: The text that must follow the list's ``]`` (after optional whitespace), if any.
    end: str = ""


class _ListBody(Body):
    stream: JsonListStream

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        assert isinstance(stream, JsonListStream)
        self.grammar = stream.grammar
        self.state = _ITEM_WAIT if self.grammar.marker.endswith("[") else _OPEN
        self.item: JsonCall | None = None

    def step(self, s: str, i: int) -> tuple[int, bool]:
        if self.state == _ITEM:
            assert self.item is not None
            i, ended = self.feed_json_call(self.item, s, i, "a list item is not a JSON object")
            if ended:
                self.item = None
                self.state = _NEXT
                return i, True
            return i, False
        c = s[i]
        if c in WS:
            i += 1
            return i, True
        if self.state == _OPEN:
            if c != "[":
                return self.fail(i, f"no JSON list after {self.grammar.marker}"), False
            self.state = _ITEM_WAIT
        elif self.state == _ITEM_WAIT:
            if c != "{":
                what = "is empty" if c == "]" and not self.calls else "does not hold objects"
                return self.fail(i, f"the call list {what}"), False
            self.item = JsonCall(self.stream, self.grammar.item)
            self.state = _ITEM
            return i, True
        elif self.state == _NEXT:
            if c == ",":
                self.state = _ITEM_WAIT
            elif c != "]":
                return self.fail(i, "expected , or ] in the call list"), False
            elif not self.grammar.end:
                self.status = DONE
                return i + 1, False
            else:
                self.state = _END
        else:  # _END
            end = self.grammar.end
            j = self.expect(s, i, end, f"text after the call list before {end}")
            if j < 0:
                return i, False
            self.status = DONE
            return j, False
        i += 1
        return i, True


class JsonListStream(MarkerStream):
    """A reply stream for one :class:`ListGrammar`; subclasses set ``grammar``."""

    grammar: ClassVar[ListGrammar]
    body_class = _ListBody

    def __init_subclass__(cls, **kwargs: object) -> None:
        if "grammar" in cls.__dict__:
            cls.marker = cls.grammar.marker
        super().__init_subclass__(**kwargs)


#: ``{"name": NAME, "arguments": {...}}``, nothing else.
_NAME_ARGS = CallShape()

GRANITE = ListGrammar("<|tool_call|>", _NAME_ARGS)
NEMOTRON_V2 = ListGrammar("<TOOLCALL>", _NAME_ARGS, "</TOOLCALL>")
#: Apriel's templates add the call's ``id`` to each item, after the arguments. A call is
#: announced at its name (its arguments stream), so the model's id is kept only when it comes
#: before the name; one written after it does not change the id announced.
APRIEL = ListGrammar("<tool_calls>", CallShape(id_key="id"), "</tool_calls>")
APERTUS = ListGrammar("<|tools_prefix|>", CallShape(name_is_key=True), "<|tools_suffix|>")
#: The marker holds the ``[``: the word "functools" alone in a reply is no call's start.
FIREFUNCTION = ListGrammar("functools[", _NAME_ARGS)
#: ``tool_call_id`` is written first, so the call is announced with the model's id.
COMMAND_R7B = ListGrammar(
    "<|START_ACTION|>",
    CallShape(name_key="tool_name", args_keys=("parameters",), id_key="tool_call_id"),
    "<|END_ACTION|>",
)


class GraniteStream(JsonListStream):
    grammar = GRANITE


class NemotronV2Stream(JsonListStream):
    grammar = NEMOTRON_V2


class AprielStream(JsonListStream):
    grammar = APRIEL


class ApertusStream(JsonListStream):
    grammar = APERTUS


class FirefunctionStream(JsonListStream):
    grammar = FIREFUNCTION


class CommandR7BStream(JsonListStream):
    grammar = COMMAND_R7B


class Granite(Family):
    name = "granite"
    label = "Granite <|tool_call|>[...] (Granite 3.x)"
    markers = (GRANITE.marker,)
    prompt_markers = (GRANITE.marker,)
    stream_class = GraniteStream
    grammar = forms.GRANITE


class NemotronV2(Family):
    name = "nemotron-v2"
    label = "Nemotron <TOOLCALL>[...]</TOOLCALL> (Nemotron Nano v2)"
    markers = (NEMOTRON_V2.marker,)
    stream_class = NemotronV2Stream
    grammar = forms.NEMOTRON_V2


class Apriel(Family):
    name = "apriel"
    label = "Apriel <tool_calls>[...]</tool_calls> (Apriel 1.5, 1.6)"
    markers = (APRIEL.marker,)
    stream_class = AprielStream
    grammar = forms.APRIEL


class Apertus(Family):
    name = "apertus"
    label = 'Apertus <|tools_prefix|>[{"NAME": {...}}]<|tools_suffix|> (Apertus)'
    markers = (APERTUS.marker,)
    stream_class = ApertusStream
    grammar = forms.APERTUS


class Firefunction(Family):
    name = "firefunction"
    label = "Firefunction functools[...] (Firefunction v2)"
    markers = (FIREFUNCTION.marker,)
    stream_class = FirefunctionStream
    grammar = forms.FIREFUNCTION


class CommandR7B(Family):
    name = "command-r7b"
    label = "Cohere <|START_ACTION|>[...]<|END_ACTION|> (Command R7B, Cohere2)"
    markers = (COMMAND_R7B.marker,)
    stream_class = CommandR7BStream
    grammar = forms.COMMAND_R7B
