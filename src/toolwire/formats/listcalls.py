"""Calls as a JSON list after a marker, read by Command R+ (the list families declared as
syntax, :mod:`.declared`, are read by the engine).

A :class:`ListGrammar` says what one family writes around its list and the shape of each
item; :class:`ListBody` reads the list, item by item (its states public for a family that
reads more around it); :class:`JsonListStream` is a stream of such lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .callshape import CallShape
from .jsoncall import JsonCall
from .markerstream import DONE, WS, Body, MarkerStream

__all__ = [
    "ITEM",
    "ITEM_WAIT",
    "LIST_END",
    "LIST_OPEN",
    "NEXT",
    "JsonListStream",
    "ListBody",
    "ListGrammar",
]

LIST_OPEN, ITEM_WAIT, ITEM, NEXT, LIST_END = range(5)


@dataclass(frozen=True)
class ListGrammar:
    """What one family writes around its list of calls."""

    #: The text that opens the list; it may end with the list's ``[`` itself.
    marker: str
    #: The shape of each item.
    item: CallShape
    #: The text that must follow the list's ``]`` (after optional whitespace), if any.
    end: str = ""


class ListBody(Body):
    stream: JsonListStream

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        assert isinstance(stream, JsonListStream)
        self.grammar = stream.grammar
        self.state = ITEM_WAIT if self.grammar.marker.endswith("[") else LIST_OPEN
        self.item: JsonCall | None = None

    def step(self, s: str, i: int) -> tuple[int, bool]:
        if self.state == ITEM:
            assert self.item is not None
            i, ended = self.feed_json_call(self.item, s, i, "a list item is not a JSON object")
            if ended:
                self.item = None
                self.state = NEXT
                return i, True
            return i, False
        c = s[i]
        if c in WS:
            i += 1
            return i, True
        if self.state == LIST_OPEN:
            if c != "[":
                return self.fail(i, f"no JSON list after {self.grammar.marker}"), False
            self.state = ITEM_WAIT
        elif self.state == ITEM_WAIT:
            if c != "{":
                what = "is empty" if c == "]" and not self.calls else "does not hold objects"
                return self.fail(i, f"the call list {what}"), False
            self.item = JsonCall(self.stream, self.grammar.item)
            self.state = ITEM
            return i, True
        elif self.state == NEXT:
            if c == ",":
                self.state = ITEM_WAIT
            elif c != "]":
                return self.fail(i, "expected , or ] in the call list"), False
            elif not self.grammar.end:
                self.status = DONE
                return i + 1, False
            else:
                self.state = LIST_END
        else:  # LIST_END
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
    body_class = ListBody

    def __init_subclass__(cls, **kwargs: object) -> None:
        if "grammar" in cls.__dict__:
            cls.marker = cls.grammar.marker
        super().__init_subclass__(**kwargs)
