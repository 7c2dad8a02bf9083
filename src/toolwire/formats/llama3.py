"""Llama 3.1–3.3: the whole reply is ``{"name": NAME, "parameters": {...}}``.

Optionally after ``<|python_tag|>``; several calls may follow one another, separated by
``;`` or whitespace, or, in a tagged reply, each call after its own ``<|python_tag|>`` (the
tag is the model's token for "a call follows", so a second one is the grammar, not a drift).
An optional ``"type": "function"`` key is accepted and any other ``type`` refused. Because
there is no marker, a reply that merely starts with ``{`` may be JSON meant for the user: it
is held until it closes, and when the tools are known an untagged object must name one of
them. Once the reply shows text that is not a call, all of it is reply text — a call can
only open at the start.

Text after calls a ``<|python_tag|>`` opened (where the grammar ends the reply) is, unless
strict, reply text and the calls stand — the tag made them certain — named
``recovered-text-after-call``; text after a bare object makes all of it text.

The arguments may come under ``"arguments"`` instead of ``"parameters"`` (what most other
JSON grammars write, and Llama models often answer with): the same whole-reply call, named in
an ``arguments-key`` notice. Its arguments do not stream as they come (only ``"parameters"``
does): once the object closes, its argument text is passed on at once, the object re-written.
JSON inside prose is never read here: a reply with text around an object is reply text (drift
recovery, in the reply pipeline, reads only a reply that is nothing but calls).

After prose, two things are read (:mod:`toolwire.formats.trailing`): ``<|python_tag|>`` and the
calls after it, anywhere — the tag is the model's own token for a call, so this is the grammar
itself, not a guess (vLLM's Llama 3 JSON reader reads a call after text, "Here is the result:
{...}", even untagged); and, unless strict, a call that is the reply's last
block, a ``{`` line after the prose to the end, naming a declared tool with arguments that fit
its schema — a guess, named ``recovered-trailing-call``. The prose streams as it comes; only
the candidate block is held back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..messages import ToolCall
from .base import Family, ReplyStream
from .callshape import CallShape
from .grammar import AnyOf, CallForm, lit
from .grammar import JsonCall as JsonForm
from .jsoncall import JsonCall, raw_controls_notice
from .scan import Markers
from .trailing import TrailingBlock, end_trailing

__all__ = ["Llama3"]

_TAG = "<|python_tag|>"
_TAGS = Markers((_TAG,))
_WS = " \t\r\n"
_START, _CALLS, _TEXT = range(3)


#: ``name`` and ``parameters``, and ``"type": "function"`` if any type. An untagged object
#: must name a declared tool when the tools are known: it may be JSON meant for the user.
_SHAPE = CallShape(("parameters", "arguments"), constants={"type": "function"})
_DECLARED = replace(_SHAPE, declared_only=True)


class Llama3Stream(ReplyStream):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._state = _START
        self._lead: list[str] = []  # whitespace before the reply starts, held
        self._raw: list[str] = []  # everything since the start while calls are open
        self._tagged = False
        self._call: JsonCall | None = None
        self._done: list[tuple[int, ToolCall]] = []
        self._kept: list[tuple[int, ToolCall]] = []  # calls read, text after them
        self._after_call = 0
        self._started: list[tuple[int, str]] = []
        self._raw_controls: set[int] = set()  # calls whose strings held raw line breaks
        #: After prose: the last block, which may be a call, held back.
        self._trail = TrailingBlock((_TAG,), brackets=not self.strict)

    def _new_object(self) -> JsonCall:
        declared = self.tools.known and not self._tagged
        return JsonCall(self, _DECLARED if declared else _SHAPE)

    def _content(self, text: str) -> None:
        if self._state == _TEXT:
            self._text(self._trail.feed(text))
            return
        s = self._take_held() + text  # a partial python tag, held
        i = 0
        n = len(s)
        while i < n:
            if self._state == _TEXT:
                self._text(self._trail.feed(s[i:]))
                return
            if self._state == _START:
                j = i
                while j < n and s[j] in _WS:
                    j += 1
                self._lead.append(s[i:j])
                i = j
                if i == n:
                    return
                if s.startswith(_TAG, i):
                    self._tagged = True
                    self._lead.append(_TAG)
                    self._state = _CALLS
                    i += len(_TAG)
                elif s[i] == "{":
                    self._state = _CALLS
                elif _TAGS.held(s, i) == n - i:  # the rest may be the start of the tag
                    self._held = s[i:]
                    return
                else:
                    self._to_text("")
                continue
            # _CALLS
            call = self._call
            if call is None:
                c = s[i]
                if c in _WS or (c == ";" and self._done):
                    self._raw.append(c)
                    i += 1
                    continue
                if self._tagged and self._done and c == "<":  # the tag again: the next call
                    if s.startswith(_TAG, i):
                        self._raw.append(_TAG)
                        i += len(_TAG)
                        continue
                    if _TAGS.held(s, i) == n - i:  # perhaps the tag, cut by the piece's end
                        self._held = s[i:]
                        return
                if c != "{":
                    if self._tagged and self._done and not self.strict:
                        self._text_after()
                    else:
                        self._to_text("text after the call")
                    continue
                call = self._call = self._new_object()
            k = call.scanner.feed(s, i)
            self._raw.append(s[i:k])
            call.note_started(self._started)
            i = k
            if call.rejected:  # first: the name may be read in the same piece that fails
                self._to_text(call.rejected)
                continue
            if call.scanner.failed:
                self._to_text("the call is not a JSON object")
                continue
            if call.scanner.done:
                self._call = None
                parsed, problem = call.finish()
                call.note_started(self._started)
                if parsed is None:
                    self._to_text(problem)
                    continue
                if call.scanner.stream_key_count == 0:  # under "arguments"
                    if self.strict:
                        self._to_text('"arguments" where Llama 3 writes "parameters"')
                        continue
                    self._notice(
                        "recovered-arguments-key",
                        f'the call to {parsed.name} gives its arguments as "arguments", '
                        'not "parameters"',
                    )
                    text = json.dumps(parsed.arguments, ensure_ascii=False)
                    self._args(call.index, text)  # the argument text, all at once
                    parsed = replace(parsed, arguments_text=text)
                if call.raw_controls:
                    self._raw_controls.add(call.index)
                self._done.append((call.index, parsed))
                self._after_call = len(self._raw)  # what follows the call starts here

    def _text_after(self) -> None:
        """Text after calls the tag opened: the calls stand (the tag made them certain), and
        the rest of the reply is its text, where the grammar would end it — a tolerance."""
        names = ", ".join(dict.fromkeys(call.name[:100] for _, call in self._done))[:300]
        self._notice(
            "recovered-text-after-call",
            f"read the call to {names} after {_TAG}; the text after it stays reply text",
        )
        self._kept, self._done = self._done, []
        between = "".join(self._raw[self._after_call :])  # the white space after the call
        self._lead, self._raw, self._started = [], [], []
        self._state = _TEXT
        self._text(self._trail.feed(between))

    def _to_text(self, reason: str) -> None:
        """The reply is not (only) calls: everything so far, and after, is reply text."""
        for index, cid in self._started:
            self._abort(index, cid, reason)
        if reason:
            self._notice("call-not-read", f"the reply is not a Llama 3 call ({reason})")
        self._text(self._trail.feed("".join(self._lead) + "".join(self._raw)))
        self._lead, self._raw, self._started, self._done = [], [], [], []
        self._call = None
        self._state = _TEXT

    def _content_end(self) -> None:
        if self._state == _CALLS and self._held:  # a piece of a tag after the calls: text
            held = self._take_held()
            if self._tagged and self._done and not self.strict:
                self._text_after()
                self._text(self._trail.feed(held))
            else:
                self._raw.append(held)
                self._to_text("text after the call")
        if self._state == _START:
            self._text("".join(self._lead) + self._take_held())
        elif self._state == _CALLS:
            if self._call is not None or not self._done:
                self._to_text("the reply ended inside the call")
            else:
                self._end_calls(self._done)
        if self._state == _TEXT:
            self._end_calls(self._kept)
            end_trailing(self, self._trail, self._whole_reply)
        self._state = _TEXT

    def _end_calls(self, calls: list[tuple[int, ToolCall]]) -> None:
        for index, call in calls:
            if index in self._raw_controls:
                raw_controls_notice(self, call.name)
            self._end(index, call)

    def _whole_reply(self) -> Llama3Stream:
        """A reader of the held block as a whole reply, with no trailing block of its own."""
        reader = Llama3Stream(self.tools, make_id=self._make_id, strict=self.strict)
        reader._trail = TrailingBlock(brackets=False)
        return reader


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return json.dumps({"name": name, "parameters": args})


_LLAMA = JsonForm(args_key="parameters")

_LLAMA3_FORM = AnyOf(
    (
        CallForm(
            _LLAMA,
            open=lit("<|python_tag|>"),
            sep=f'";"? space {lit("<|python_tag|>")}?',
            triggers=("<|python_tag|>",),
        ),
        CallForm(_LLAMA, sep='";"?'),
    )
)


class Llama3(Family):
    name = "llama3"
    label = 'Llama 3 JSON reply {"name", "parameters"} (Llama 3.1–3.3)'
    end_tokens = ("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>")
    samples = (_sample,)
    markers = (_TAG, "{")
    stream_class = Llama3Stream
    grammar = _LLAMA3_FORM
    one_call_per_message = True
