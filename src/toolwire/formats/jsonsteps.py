"""The engine's steps for a call written as one JSON object (``json`` shapes, and a tagged
one's ``json_too``), and for call objects in a framing that holds a call written otherwise,
a model's JSON habit:

- A list of call objects where a syntax frames one: ``<tool_call>[{…}, {…}]</tool_call>``. A
  JSON syntax whose tag holds one call object (Hermes, K2 Horizon, InternLM2, …) sometimes
  gets a JSON list of them in that tag: the model's habit from a list family (Mistral,
  Llama 3, Functionary) or from OpenAI's ``tool_calls`` array. SGLang's JSON readers take a
  list wherever an object is due. Each object is a call, as if each had its own tag
  (``recovered-call-list``). Not for a syntax whose calls are a list already (its own ``[``
  is its grammar), nor a whole-reply form (a bare list there is that family's own, or prose).
- A call object where a tagged syntax's name is due, right after a tag:
  ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` in GLM's framing, which writes the
  name and ``<arg_key>`` tags there — Hermes' body in a sibling's tag, as peers read it
  (``recovered-json-call``); its list too. Not where the name is an attribute's value
  (``<invoke name="``): a ``{`` there is no call.

Both for every syntax, learned or declared, each repair named once the block is read;
strict refuses them. (Where the object breaks in a list of calls, the item is left out:
:meth:`~.blockends.BlockEnds._left_item`.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..events import NoticeCode
from .callshape import NO_TOOL
from .listitems import ItemEnd
from .markerstream import FAILED, OPEN, WS, Body
from .tagsteps import _CALL, _NEXT

#: Why a call that should be a JSON object is none.
NOT_OBJECT = "the call is not a JSON object"

if TYPE_CHECKING:
    from .derived import DerivedShape
    from .jsoncall import JsonCall

__all__ = ["IN_LIST", "NOT_OBJECT", "JsonSteps"]

#: The state between the call objects of a list in one call's framing.
IN_LIST = 22


class JsonSteps(Body):
    """The steps of a call as one JSON object, and of a list of them in one call's framing:
    a mixin of the engine's body (see the module's doc)."""

    shape: DerivedShape
    told: list[tuple[NoticeCode, str]]
    listed: bool
    looked: bool
    no_tool: bool
    json_call: JsonCall | None
    #: A list of call objects is open in this call's framing.
    in_list: bool = False

    if TYPE_CHECKING:  # the body's own, which these steps call

        def words(self, words: tuple[str, ...], then: int) -> None: ...

        def feed_json_call(
            self, call: JsonCall, s: str, i: int, not_object: str
        ) -> tuple[int, bool]: ...

        def json_call_over(self, call: JsonCall, k: int, not_object: str) -> tuple[int, bool]: ...

        def _left_item(self, item: ItemEnd, i: int) -> tuple[int, bool]: ...

    def sibling_json(self, s: str, i: int) -> bool:
        """A call object where this tagged syntax's name is due, right after a tag (see the
        module's doc): named, and read as a JSON call."""
        shape = self.shape
        if self.in_list:  # (a list this step opened: its items are call objects)
            return s[i] == "{"
        if s[i] not in "{[" or self.stream.strict or shape.json_too:
            return False
        last = shape.opening[-1] if shape.opening else ""
        if shape.kind not in ("tags", "name-python") or not last.endswith((">", "|")):
            return False
        if not any(code == "recovered-json-call" for code, _ in self.told):
            self.told.append(
                ("recovered-json-call", f"read a call written as JSON in {shape.marker}")
            )
        return True

    def list_opens(self, s: str, i: int) -> bool:
        """A ``[`` where a call object is due opens a list of them (see the module's doc)."""
        shape = self.shape
        if s[i] != "[" or self.in_list or self.listed or shape.whole or self.stream.strict:
            return False
        self.in_list = True
        if not any(code == "recovered-call-list" for code, _ in self.told):
            self.told.append(("recovered-call-list", f"read a list of calls in one {shape.marker}"))
        return True

    def call_read(self) -> None:
        """A call object is read: the list goes on, or the call's closing words are due."""
        if self.in_list:
            self.state = IN_LIST
        else:
            self.words(self.shape.post, _NEXT)

    def list_step(self, s: str, i: int) -> tuple[int, bool]:
        """Between a list's call objects: ``,`` and the next, or ``]`` and the closing words."""
        c = s[i]
        if c in WS:
            return i + 1, True
        if c == ",":
            self.json_call = None
            self.state = _CALL
            return i + 1, True
        if c == "]":
            self.in_list = False
            self.words(self.shape.post, _NEXT)
            return i + 1, True
        return self.fail(i, "expected , or ] after a call in a list of calls"), False

    def _json(self, s: str, i: int) -> tuple[int, bool]:
        """A call written as one JSON object (``json`` shapes)."""
        call = self.json_call
        assert call is not None
        if call.index >= 0 and self.looked:  # announced (most pieces: in its arguments)
            scanner = call.scanner
            k = scanner.feed(s, i)
            if not call.noted:
                call.note_started(self.started)
            if not scanner.over:
                return k, False
            return self._json_over(call, s, i, k)
        return self._json_read(call, s, i, *self.feed_json_call(call, s, i, NOT_OBJECT))

    def _json_over(self, call: JsonCall, s: str, start: int, k: int) -> tuple[int, bool]:
        """The announced call's object is over at ``k`` (its piece began at ``start``)."""
        return self._json_read(call, s, start, *self.json_call_over(call, k, NOT_OBJECT))

    def _json_read(
        self, call: JsonCall, s: str, start: int, i: int, ended: bool
    ) -> tuple[int, bool]:
        """What follows a piece of the call object read from ``start`` to ``i``."""
        rejected = call.rejected
        self.looked = self.looked or bool(call.name or rejected)  # (a call's name)
        if not ended and self.shape.whole and rejected:
            # its name said so, however the object went on: prose from here (the same
            # reason whether the name and the break came in one piece or two)
            return self.fail(i, rejected), False
        if ended:
            self.call_read()
        elif self.status == FAILED and self.reason == NO_TOOL:
            self.status = OPEN  # a whole item naming the template's pseudo-tool: no call
            self.no_tool = True
            self.words(self.shape.post, _NEXT)
            return i, True
        elif (
            self.status == FAILED
            and self.listed
            and not self.stream.strict
            # broken inside a string: at the family's marker (a string cut short, the next
            # call begun), which the stream must see again, not skip as the item's text
            and not call.scanner.in_string
        ):
            scanner = call.scanner
            broke = scanner.failed  # inside the object: go on from where it broke
            item = ItemEnd(
                self.shape.trail[0],
                scanner.depth if broke else 0,
                scanner.in_string if broke else False,
                lines=not self.shape.next_call,
            )
            item.parts.append(scanner.text() + (s[start:i] if broke else ""))
            return self._left_item(item, i)
        return i, ended
