"""``pythonic`` (Llama 4, and models told to answer the same way): the reply is a Python list
of calls, ``[f(a=1, b="x"), g()]``, with no marker (``<|python_start|>``/``<|python_end|>``
around it are accepted). The list itself is read by :mod:`toolwire.formats.pycalls` (each call
``NAME(key=value, ...)``, keyword arguments only, values Python literals never evaluated; a
positional value makes the call text with a notice); LFM2's tagged list is a declared
syntax (:mod:`toolwire.formats.declared`).

The bare list has no marker, so it is read only where it cannot be anything else, and these
rules decide it:

1. The reply must *be* the list: after optional whitespace (and thinking, which the reply
   stream splits off first), the first character is ``[``, and after the closing ``]`` only
   whitespace follows. Text before or after makes the whole reply text — except text after
   ``<|python_end|>``: the tags mark exactly where the list is, so, unless strict, its calls
   stand and the text after is reply text, named ``recovered-text-after-call`` (Llama 4 ends
   its reply with the list; SGLang reads prose on both sides of a tagged list).
2. Each item must look like a call: a name, then ``(`` at once. ``[link text](url)``,
   ``[1] a footnote``, ``[x, y]`` fail at the first character a call cannot hold, and stay
   text without a notice — nothing there looked like a call.
3. When the tools are known, every call must name a declared tool (``ToolIndex.has``);
   without tools any well-formed name is read, as for every other family.
4. Once ``NAME(`` was read, a list that does not end as calls is text with a
   ``call-not-read`` notice: the model meant a call and the user should know it was not run.

Calls are announced as soon as their name and ``(`` are read, and end only when the reply
does (rule 1); a reply that breaks a rule aborts them and becomes text.

Templates write the list by hand, and a model writes what its template taught it. Unless
strict, and named ``recovered-python-values`` on each call read so: values as
:mod:`toolwire.formats.pyliteral` reads them loosely (Llama 3.2's and Llama 4's pythonic
templates write ``city=Paris`` and ``time="say "hi""``), a comma left out between two
arguments (vLLM's Gemma 3 template writes ``city="Paris"days=3``); and, when the tools are
known, the list without its brackets, ``f(a=1), g(b=2)`` as the whole reply (SGLang's Llama 4
template), ended by the reply's end — every rule above holds for it but the brackets.

After prose (:mod:`toolwire.formats.trailing`): ``<|python_start|>`` and the list after it are
read anywhere — the tag is Llama 4's own token opening a call list (vLLM's Llama 4 reader reads
it, its ``<|python_end|>`` written or not), so this is the grammar, not a guess; and, unless
strict, a call list that is the reply's last block, a ``[`` line after the prose to the end,
whose every call names a declared tool with arguments that fit its schema — a guess, named
``recovered-trailing-call``. The prose streams as it comes; only the candidate block is held
back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..messages import ToolCall
from .base import Family
from .grammar import AnyOf, CallForm, lit
from .grammar_literals import Pythonic as PythonCalls
from .markerstream import DONE, FAILED, OPEN, WS, Body, MarkerStream, expect_literal
from .pycalls import CallListBody, loose_notice, python_call
from .trailing import TrailingBlock, end_trailing

__all__ = ["Pythonic"]

_PY_START = "<|python_start|>"
_PY_END = "<|python_end|>"
#: Llama 4's end of a message whose turn goes on (with the calls' results): after the list.
_EOM = "<|eom|>"


def _list_sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return "[" + python_call(name, args) + "]"


_PYTHONIC_FORM = AnyOf(
    (
        CallForm(
            PythonCalls(),
            open=f'{lit("<|python_start|>")} space "["',
            close=f'"]" space ({lit("<|python_end|>")})?',
            triggers=("<|python_start|>",),
            sep='","',
        ),
        CallForm(PythonCalls(), open='"["', close='"]"', starts=("[{name}(",), sep='","'),
    )
)


class _PythonicBody(CallListBody):
    declared_only = True


_START, _CALLS, _TRAILER, _TEXT = range(4)


class PythonicStream(MarkerStream):
    """The whole reply is one call list (see the module docstring for the rules)."""

    marker = "["
    body_class = _PythonicBody

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._state = _START
        self._lead: list[str] = []  # whitespace and the python tag before the list, held
        self._raw = []  # the list and what follows it, held until the reply ends
        self._tagged = False
        self._closed = False
        self._ended = False  # the list was followed by <|eom|>
        self._kept: list[tuple[int, ToolCall]] = []  # calls read, text after them
        self._kept_body: CallListBody | None = None
        self._after_end = 0
        #: After prose: the last block, which may be a call list, held back.
        self._trail = TrailingBlock((_PY_START,), brackets=not self.strict)

    def _content(self, text: str) -> None:
        if self._state == _TEXT:
            self._text(self._trail.feed(text))
            return
        s = self._take_held() + text
        i = 0
        n = len(s)
        while i < n:
            state = self._state
            if state == _TEXT:
                self._text(self._trail.feed(s[i:]))
                return
            if state == _CALLS:
                i = self._read_list(s, i)
                if self._held:
                    return
                continue
            j = i
            while j < n and s[j] in WS:
                j += 1
            (self._lead if state == _START else self._raw).append(s[i:j])
            i = j
            if i == n:
                return
            i = self._start(s, i) if state == _START else self._trailer(s, i)
            if self._held:
                return

    def _start(self, s: str, i: int) -> int:
        if s[i] == "[":
            self._body = self.new_body()
            self._state = _CALLS
            return i
        if not self.strict and self.tools.known and (s[i].isalpha() or s[i] == "_"):
            body = self._body = self.new_body()  # a bare list: ``f(a=1), g(b=2)`` (Llama 4)
            assert isinstance(body, CallListBody)
            body.open_bare()
            self._state = _CALLS
            return i
        status, j = expect_literal(s, i, _PY_START)
        if self._tagged or status == FAILED:
            self._to_text("")
            return i
        if status == OPEN:
            self._held = s[i:]
            return len(s)
        self._tagged = True
        self._lead.append(_PY_START)
        return j

    def _read_list(self, s: str, i: int) -> int:
        body = self._body
        assert isinstance(body, CallListBody)
        k = body.feed(s, i)
        self._raw.append(s[i:k])
        if body.status == OPEN:
            self._held = s[k:]
        elif body.status == FAILED:
            self._to_text(body.reason if body.looked else "")
        else:
            self._state = _TRAILER
        return k

    def _trailer(self, s: str, i: int) -> int:
        if not self._ended:  # the message's end token, as the template writes it after calls
            status, j = expect_literal(s, i, _EOM)
            if status == OPEN:
                self._held = s[i:]
                return len(s)
            if status == DONE:
                self._ended = True
                self._raw.append(_EOM)
                return j
        elif not (self._closed and not self.strict):
            self._to_text("text after the call list")
            return i
        if self._closed and not self.strict:  # text after <|python_end|>: the list stands
            self._text_after()
            return i
        status, j = expect_literal(s, i, _PY_END)
        if not self._tagged or self._closed or status == FAILED:
            self._to_text("text after the call list")
            return i
        if status == OPEN:
            self._held = s[i:]
            return len(s)
        self._closed = True
        self._raw.append(_PY_END)
        self._after_end = len(self._raw)  # what follows the list's end tag starts here
        return j

    def _text_after(self) -> None:
        """Text after a list its tags closed: the calls stand (the tags mark exactly where the
        list is), and the rest is the reply's text, where the grammar would end it — a
        tolerance, named."""
        body = self._body
        assert isinstance(body, CallListBody)
        names = ", ".join(dict.fromkeys(call.name[:100] for _, call in body.calls))[:300]
        self._notice(
            "recovered-text-after-call",
            f"read the call to {names} in {_PY_START}…{_PY_END}; the text after it stays "
            "reply text",
        )
        self._kept = body.calls
        self._kept_body = body
        between = "".join(self._raw[self._after_end :])  # the white space after the tag
        self._lead, self._raw = [], []
        self._body = None
        self._state = _TEXT
        self._text(self._trail.feed(between))

    def _to_text(self, reason: str) -> None:
        """The reply is not (only) a call list: all of it is reply text."""
        body = self._body
        for index, cid in body.started if body is not None else ():
            self._abort(index, cid, reason or "not a call")
        if reason:
            self._notice("call-not-read", f"the reply is not a call list ({reason})")
        self._text(self._trail.feed("".join(self._lead) + "".join(self._raw)))
        self._lead, self._raw = [], []
        self._body = None
        self._state = _TEXT

    def _content_end(self) -> None:
        held = self._take_held()
        body = self._body
        if self._state == _START:
            self._text("".join(self._lead) + held)
        elif self._state == _CALLS and isinstance(body, CallListBody):
            k = body.finish(held)  # a loose value or a bare list may end with the reply
            self._raw.append(held[:k])
            held = held[k:]
            if body.status == DONE:  # what follows it is read as after any list
                self._state = _TRAILER
                self._content(held)
                held = self._take_held()
            else:
                self._raw.append(held)
                if body.status == OPEN:
                    body.end_of_reply()
                self._to_text(body.reason if body.looked else "")
        if self._state == _TRAILER and isinstance(body, CallListBody):
            if held:
                self._raw.append(held)
                self._to_text("text after the call list")
            else:
                self._end_calls(body, body.calls)
        if self._state == _TEXT:
            self._end_calls(self._kept_body, self._kept)
            end_trailing(self, self._trail, self._whole_reply)
        self._state = _TEXT

    def _end_calls(self, body: Body | None, calls: list[tuple[int, ToolCall]]) -> None:
        for index, call in calls:
            loose_notice(self, body if isinstance(body, CallListBody) else None, index, call.name)
            self._end(index, call)

    def _whole_reply(self) -> PythonicStream:
        """A reader of the held block as a whole reply, with no trailing block of its own."""
        reader = PythonicStream(self.tools, make_id=self._make_id, strict=self.strict)
        reader._trail = TrailingBlock(brackets=False)
        return reader


class Pythonic(Family):
    name = "pythonic"
    label = "Python call list [NAME(key=value), ...] as the whole reply (Llama 4)"
    end_tokens = ("<|eot|>",)  # Llama 4
    samples = (_list_sample,)
    markers = (_PY_START, "[")
    stream_class = PythonicStream
    grammar = _PYTHONIC_FORM
