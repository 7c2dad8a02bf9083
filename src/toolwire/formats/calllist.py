"""Call objects in a framing that holds a call written otherwise: a model's JSON habit.

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
strict refuses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..events import NoticeCode
from .markerstream import WS, Body
from .tagsteps import _CALL, _NEXT

if TYPE_CHECKING:
    from .derived import DerivedShape
    from .jsoncall import JsonCall

__all__ = ["IN_LIST", "CallList"]

#: The state between the call objects of a list in one call's framing.
IN_LIST = 22


class CallList(Body):
    """The steps of a list of call objects in one call's framing: a mixin of the engine's
    body (see the module's doc)."""

    shape: DerivedShape
    told: list[tuple[NoticeCode, str]]
    listed: bool
    json_call: JsonCall | None
    #: A list of call objects is open in this call's framing.
    in_list: bool = False

    if TYPE_CHECKING:  # the body's own, which these steps call

        def words(self, words: tuple[str, ...], then: int) -> None: ...

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
