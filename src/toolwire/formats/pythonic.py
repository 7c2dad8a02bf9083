"""Calls written as a Python list of calls: LFM2's tagged list, and Llama 4's bare one.

- ``lfm2`` (LFM2, LFM2.5): ``<|tool_call_start|>[get_weather(city='Paris', days=3),
  other(a=1)]<|tool_call_end|>``, anywhere in the reply. Some LFM2 models write the same block
  as JSON instead, a list of ``{"name": NAME, "arguments": {...}}`` objects or one such
  object (``<|tool_call_start|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]
  <|tool_call_end|>``): SGLang's LFM2 reader takes both, and so does this one. The first
  character inside the list decides which (``{`` opens JSON, a name opens a Python call), so
  nothing is read twice; the JSON objects are read as every JSON family reads its calls.
- ``pythonic`` (Llama 4, and models told to answer the same way): ``[f(a=1, b="x"), g()]``
  with no marker (``<|python_start|>``/``<|python_end|>`` around it are accepted).

Each call is ``NAME(key=value, ...)``: a (possibly dotted) name, keyword arguments only,
each value a Python literal read by :mod:`toolwire.formats.pyliteral` (never evaluated). A
positional value (``get_weather('Tokyo')``) makes the call text with a notice: mapping it to the
schema's properties by order would guess (a JSON schema's properties carry no order a client
must keep), and dropping it would run the tool without what the model gave. The
arguments are handed on as the JSON values they spell, untyped, and their JSON text streams
while the call is read.

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

import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from ..messages import ToolCall
from .base import Family
from .callshape import CallShape
from .grammar import AnyOf, CallForm, lit
from .grammar_forms import json_list
from .grammar_literals import Pythonic as PythonCalls
from .jsoncall import JsonCall
from .markerstream import DONE, FAILED, OPEN, WS, Body, MarkerStream, expect_literal
from .pyliteral import PYTHON, LiteralBody
from .textargs import NameReader
from .trailing import TrailingBlock, end_trailing

__all__ = ["Lfm2", "Pythonic"]

_LFM2_OPEN = "<|tool_call_start|>"
_LFM2_CLOSE = "<|tool_call_end|>"
_PY_START = "<|python_start|>"
_PY_END = "<|python_end|>"
#: Llama 4's end of a message whose turn goes on (with the calls' results): after the list.
_EOM = "<|eom|>"
#: A tool name: dotted words (``Calendar.create_event``), hyphens allowed as in tool names.
_TOOL_NAME = re.compile(r"[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*\Z")
_ARG_NAME = re.compile(r"[A-Za-z_$][\w$\-]*\Z")

_OPEN_LIST, _NEXT, _NAME, _PAREN, _ARG, _KEY, _EQ, _VALUE, _AFTER_ARG, _AFTER_CALL, _END = range(11)


class CallListBody(LiteralBody):
    """Reads ``[NAME(key=value, ...), ...]`` from its ``[``, then the family's ``end``.

    Unless strict, values are read loosely (:mod:`toolwire.formats.pyliteral`: unquoted text,
    quotes left unescaped) and a comma left out between two arguments is read as there; each
    call read so is named in :attr:`loosened`, for the stream's notice when the call stands.
    A ``bare`` list has no brackets: its calls are parted by commas and the reply's end
    (:meth:`finish`) ends it.
    """

    dialect = PYTHON
    loose_values = True
    #: The text that must follow the list (after optional whitespace), if any.
    end: ClassVar[str] = ""
    #: Calls must name a declared tool when the tools are known.
    declared_only: ClassVar[bool] = False

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        #: ``NAME(`` was read: what failed after it was meant as a call.
        self.looked = False
        self.names = NameReader("(", "tool name")
        self.keys = NameReader("=,)" + WS, "argument name")
        self.key = ""
        self.args: dict[str, Any] = {}
        #: The list has no brackets (the reply is the calls).
        self.bare = False
        #: No more text will come: a loose reading decides at the text's end.
        self.final = False
        #: For each call read loosely, by its index: what was loosened.
        self.loosened: dict[int, list[str]] = {}

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _VALUE:
            return self._value(s, i)
        if state in (_NAME, _KEY):
            return self._name(s, i)
        if s[i] in WS:
            return i + 1, True
        c = s[i]
        if state == _OPEN_LIST:
            if c != "[":
                return self.fail(i, "no [ opens the call list"), False
            self.state = _NEXT
        elif state == _NEXT:  # after [ or a comma between calls
            if c == "]" and self.calls:
                return self._list_end(i)
            if c == "]":
                return self.fail(i, "the call list is empty"), False
            self.state = _NAME
            return i, True
        elif state == _PAREN:
            return self._paren(s, i)
        elif state == _ARG:  # after ( or a comma between arguments
            if c == ")":
                return self._call_end(i)
            if not (c.isalpha() or c in "_$"):  # a value where a keyword must be
                # positional values are not mapped to the schema's properties by order:
                # a JSON schema's properties carry no order a client must keep
                return self.fail(i, "a positional argument; only key=value arguments"), False
            self.state = _KEY
            return i, True
        elif state == _AFTER_ARG:
            if c == ")":
                return self._call_end(i)
            if c != "," and not self.stream.strict and (c.isalpha() or c in "_$"):
                self._loosen(["a comma left out"])  # ``city="Paris"days=3``
                self.state = _KEY
                return i, True
            if c != ",":
                return self.fail(i, "expected , or ) after an argument"), False
            self.state = _ARG
        elif state == _EQ:
            if c != "=":
                return self.fail(i, "an argument without =; only key=value arguments"), False
            return self._start_value(i)
        elif state == _AFTER_CALL:
            if c == "]" and not self.bare:
                return self._list_end(i)
            if c == "<" and self.bare:  # a tag after the calls: the stream reads it
                self.status = DONE
                return i, False
            if c != ",":
                return self.fail(i, "expected , or ] after a call"), False
            self.state = _NEXT
        else:  # _END
            j = self.expect(s, i, self.end, f"text after the call list before {self.end}")
            if j < 0:
                return i, False
            self.status = DONE
            return j, False
        return i + 1, True

    def _name(self, s: str, i: int) -> tuple[int, bool]:
        """The tool's name (state ``_NAME``) or an argument's (``_KEY``)."""
        reader = self.names if self.state == _NAME else self.keys
        name, j = reader.read(self, s, i)
        if name is None:
            return j, self.status == OPEN and j < len(s)
        if self.state == _NAME:
            if not _TOOL_NAME.match(name):
                return self.fail(i, f"{name[:40]!r} is not a tool name"), False
            self.name = name
            self.state = _PAREN
        else:
            if not _ARG_NAME.match(name):
                return self.fail(i, f"{name[:40]!r} is not an argument name"), False
            if name in self.args:
                return self.fail(i, f"the argument {name!r} is given twice"), False
            self.key = name
            self.state = _EQ
        return j, True

    def _paren(self, s: str, i: int) -> tuple[int, bool]:
        if s[i] != "(":
            return self.fail(i, "no ( after the tool's name"), False
        tools = self.stream.tools
        undeclared = self.declared_only and tools.known and not tools.has(self.name)
        # with no brackets, only a declared tool's name makes the text look like a call
        self.looked = not (self.bare and undeclared)
        if undeclared:
            return self.fail(i, f"{self.name!r} is not a declared tool"), False
        self.open_call(self.name)
        self.args = {}
        self.state = _ARG
        return i + 1, True

    def _start_value(self, i: int) -> tuple[int, bool]:
        self.delta(
            ("{" if not self.args else ", ") + json.dumps(self.key, ensure_ascii=False) + ": "
        )
        self.args[self.key] = None  # a placeholder keeps the order and catches a repeat
        self.start_value()
        self.state = _VALUE
        return i + 1, True

    def start_value(self) -> None:
        super().start_value()
        assert self.reader is not None
        self.reader.final = self.final

    def _value(self, s: str, i: int) -> tuple[int, bool]:
        j, complete = self.feed_value(s, i, f"the value of {self.key!r}")
        if complete:
            assert self.reader is not None
            self.args[self.key] = self.reader.value
            self._loosen(self.reader.loosened)
            self.state = _AFTER_ARG
        return j, complete

    def _loosen(self, what: list[str]) -> None:
        if what:
            seen = self.loosened.setdefault(self.index, [])
            seen.extend(w for w in what if w not in seen)

    def finish(self, s: str) -> int:
        """The reply ended, ``s`` the text held back: read it knowing nothing follows. A bare
        list whose last call ended is then complete; where it stopped is returned."""
        self.final = True
        if self.reader is not None:
            self.reader.final = True
        j = self.feed(s, 0)
        if self.status == OPEN and self.bare and self.state == _AFTER_CALL and j == len(s):
            self.status = DONE
        return j

    def _call_end(self, i: int) -> tuple[int, bool]:
        self.delta("}" if self.text else "{}")
        self.end_call(dict(self.args))
        self.names = NameReader("(", "tool name")
        self.state = _AFTER_CALL
        return i + 1, True

    def _list_end(self, i: int) -> tuple[int, bool]:
        if self.end:
            self.state = _END
            return i + 1, True
        self.status = DONE
        return i + 1, False


def loose_notice(stream: MarkerStream, body: CallListBody | None, index: int, name: str) -> None:
    """Name a call whose values were read loosely (``recovered-python-values``)."""
    what = body.loosened.get(index) if body is not None else None
    if what:
        stream._notice(
            "recovered-python-values",
            f"the call to {name[:100]} wrote its values as no Python literal is written "
            f"({', '.join(what)}); read as its template writes them",
        )


# ----------------------------------------------------------------------------- LFM2


class _Lfm2PythonBody(CallListBody):
    end = _LFM2_CLOSE


#: LFM2's JSON form: exactly ``name`` and ``arguments``, as SGLang's reader shows it.
_LFM2_JSON = CallShape()
_L_START, _L_LIST, _L_PYTHON, _L_ITEM, _L_NEXT, _L_END = range(6)


class _Lfm2Body(Body):
    """One ``<|tool_call_start|>`` block, in either of LFM2's forms: after ``[``, a name
    hands the rest to the Python list's reader, ``{`` reads JSON call objects; a ``{`` right
    after the marker is one JSON call."""

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.python: _Lfm2PythonBody | None = None
        self.item: JsonCall | None = None
        self.listed = True  # the JSON calls are in a list (else one object)

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _L_PYTHON:
            return self._python(s, i)
        if state == _L_ITEM:
            assert self.item is not None
            i, ended = self.feed_json_call(self.item, s, i, "a call is not a JSON object")
            if ended:
                self.item = None
                self.state = _L_NEXT if self.listed else _L_END
            return i, ended
        c = s[i]
        if c in WS:
            return i + 1, True
        if state == _L_START:
            if c == "[":
                self.state = _L_LIST
                return i + 1, True
            if c != "{":
                return self.fail(i, "no [ opens the call list"), False
            self.listed = False
            return self._item(i)
        if state == _L_LIST:  # the first item decides the form
            if c == "{":
                return self._item(i)
            if self.calls:  # one list, one form
                return self.fail(i, "a JSON call list goes on with no JSON object"), False
            python = self.python = _Lfm2PythonBody(self.stream)
            python.state = _NEXT  # its [ is read
            python.started, python.calls = self.started, self.calls  # one record of calls
            self.state = _L_PYTHON
            return self._python(s, i)
        if state == _L_NEXT:
            if c == ",":
                self.state = _L_LIST
                return i + 1, True
            if c != "]":
                return self.fail(i, "expected , or ] in the call list"), False
            self.state = _L_END
            return i + 1, True
        j = self.expect(s, i, _LFM2_CLOSE, f"text after the calls before {_LFM2_CLOSE}")
        if j < 0:
            return i, False
        self.status = DONE
        return j, False

    def _item(self, i: int) -> tuple[int, bool]:
        """A JSON call object starts at ``s[i]`` (its ``{``, read by the call's scanner)."""
        self.item = JsonCall(self.stream, _LFM2_JSON)
        self.state = _L_ITEM
        return i, True

    def _python(self, s: str, i: int) -> tuple[int, bool]:
        python = self.python
        assert python is not None
        j = python.feed(s, i)
        self.status, self.reason = python.status, python.reason
        return j, False

    def end_of_reply(self) -> None:
        if self.python is not None:
            self.python.end_of_reply()
            self.status, self.reason = self.python.status, self.python.reason
            return
        super().end_of_reply()


class Lfm2Stream(MarkerStream):
    marker = _LFM2_OPEN
    body_class = _Lfm2Body

    def _close(self, body: Body) -> None:
        if body.status == DONE and isinstance(body, _Lfm2Body):
            for index, call in body.calls:
                loose_notice(self, body.python, index, call.name)
        super()._close(body)


def _python_call(name: str, args: Mapping[str, Any]) -> str:
    return name + "(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"


def _lfm2_sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return "<|tool_call_start|>[" + _python_call(name, args) + "]<|tool_call_end|>"


def _list_sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return "[" + _python_call(name, args) + "]"


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

_LFM2 = ("<|tool_call_start|>", "<|tool_call_end|>")

_LFM2_FORM = AnyOf(
    (
        CallForm(
            PythonCalls(),
            open=f'{lit(_LFM2[0])} space "["',
            close=f'"]" space {lit(_LFM2[1])}',
            triggers=(_LFM2[0],),
            sep='","',
        ),
        json_list(_LFM2[0], end=_LFM2[1]),
    )
)


class Lfm2(Family):
    name = "lfm2"
    label = "LFM2 <|tool_call_start|>[NAME(key=value)]<|tool_call_end|> (LFM2, LFM2.5)"
    kept_tokens = ("<|tool_call_end|>",)
    samples = (_lfm2_sample,)
    markers = (_LFM2_OPEN,)
    #: LFM2 8B's template shows no calls; its prompt lists the tools between these tokens.
    prompt_markers = ("<|tool_list_start|>",)
    stream_class = Lfm2Stream
    grammar = _LFM2_FORM


# ----------------------------------------------------------------------------- bare list


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
            body.bare = True
            body.state = _NAME
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
