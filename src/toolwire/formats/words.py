"""Calls in words: the lenient reader for models asked to call tools in their prompt.

A model without native tool calling is shown the tools in its system prompt and asked for
``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``. Small models drift, so
this reader takes, as they stream: that Hermes form (its JSON read as almost-JSON,
``"parameters"`` for ``"arguments"``); ``<function=NAME>{...}</function>``; Qwen-Coder
``<function=NAME><parameter=P>`` blocks; the call's JSON in a code fence, when it names a
declared tool; and a reply that is only the call's JSON. Words go out at once; a call is held
until it closes; a code fence that is not a call passes through untouched; a
``<tool_response>`` the model writes itself is never shown and never believed. A block it
cannot read becomes a failed call named :data:`UNREADABLE`, whose result tells the model how
to write one. Nothing is typed here: the arguments are the object the model wrote (the text of
each ``<parameter=P>`` value, marked ``text_values``), typed once by the argument pipeline.

A call written as bare JSON after a line of prose (``Sure, I will check.\n{"name": ...}``) is
read when it is the reply's last block, names a declared tool and its arguments fit the tool's
schema (:mod:`toolwire.formats.trailing`), named ``recovered-trailing-call``; the prose streams
as it comes and stays content, only the candidate block is held back. JSON in the middle of
prose stays prose.

The reader is linear in the reply, however it is cut: markers are found with one search per
chunk, the text of a block is joined once when the block closes, and a reply held because it
may be nothing but a call's JSON is decided by its first character, not re-read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..arguments.read import ReadError, read_json
from ..events import recovered
from ..messages import ToolCall
from .base import Family, ReplyStream
from .callshape import CallShape
from .declared import QWEN_XML
from .jsoncall import raw_controls_notice, read_call_json
from .recovery import recover
from .scan import Markers
from .trailing import TrailingBlock, end_trailing

__all__ = ["HOW_TO_CALL", "UNREADABLE", "Words"]

#: The name of a call the reader could not read: its result is :data:`HOW_TO_CALL`.
UNREADABLE = "unreadable_tool_call"
HOW_TO_CALL = (
    "That tool call could not be read. Write each call on its own, exactly like this:\n"
    '<tool_call>\n{"name": "the_tool_name", "arguments": {"parameter": "value"}}\n</tool_call>'
)

# opening marker -> closing marker
_BLOCKS = {
    "<tool_call>": "</tool_call>",
    "<function=": "</function>",
    "```": "```",
    "<tool_response>": "</tool_response>",
}
_OPENINGS = Markers(_BLOCKS)
_CLOSERS = {opener: Markers((closer,)) for opener, closer in _BLOCKS.items()}
#: A block longer than this is cut there, unread: an unreadable call (a fence: text).
_MAX_BLOCK = 1024 * 1024
_FENCE_INFO = re.compile(r"\A([A-Za-z0-9_+-]*)[ \t]*\n")
#: A call object in words: ``arguments`` or ``parameters`` (perhaps JSON in a string, or
#: missing), other keys ignored: the model was only asked in prose.
_SHAPE = CallShape(
    ("arguments", "parameters"), other_keys=True, args_optional=True, args_as_text=True
)
#: In a code fence, JSON is a call only when it names a declared tool.
_FENCED = replace(_SHAPE, declared_only=True)
#: With ``strict``: exactly the form the model was asked for.
_ASKED = CallShape(("arguments",))
_QWEN_XML = QWEN_XML.family

# whether the reply may still be nothing but a call's JSON (held until it ends)
_UNDECIDED, _HOLDING, _PASSING = range(3)


def _almost_json(text: str, *, strict: bool = False) -> tuple[Any, tuple[str, ...], bool]:
    """The value of almost-JSON text, the repairs it took, and whether raw line breaks or
    tabs in its strings were read (a call's JSON as every reader of calls reads it:
    :func:`~toolwire.formats.jsoncall.read_call_json`); None when it cannot be read."""
    if not strict:
        try:
            value, raw = read_call_json(text)
        except (ValueError, RecursionError):
            pass
        else:
            if raw:
                return value, (), True
    try:
        value, repairs = read_json(text, strict=strict)
    except ReadError:
        return None, (), False
    return value, repairs, False


def _loose_keys(obj: Any) -> bool:
    """Did the call object need the lenient shape (``parameters``, arguments as a string or
    missing, keys besides name and arguments)?"""
    return isinstance(obj, dict) and (
        not isinstance(obj.get("arguments"), dict) or bool(set(obj) - {"name", "arguments"})
    )


class WordsStream(ReplyStream):
    # the tools as given, for recover_calls (ReplyStream keeps only an index)
    tools_given: Sequence[Mapping[str, Any]] | None = None

    #: Strict: only the form the model was asked for is a call, read as strict JSON; any
    #: other shape stays text. Otherwise every tolerance used is named in a notice.
    strict = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._opener = ""  # the block being read, "" outside one
        self._block: list[str] = []
        self._block_size = 0
        self._found = False
        self._start = _UNDECIDED
        self._start_text: list[str] = []
        #: After prose: the last block, which may be a call's JSON, held back.
        self._trail = TrailingBlock()

    def _content(self, text: str) -> None:
        s = self._take_held() + text
        i, n = 0, len(s)
        while i < n:
            if not self._opener:
                j, marker = _OPENINGS.scan(s, i)
                self._words(s[i:j])
                if not marker:
                    self._held = s[j:]
                    return
                self._opener = marker
                i = j + len(marker)
                continue
            j, closer = _CLOSERS[self._opener].scan(s, i)
            room = _MAX_BLOCK - self._block_size
            if j - i > room:
                # too long to be a call: its first _MAX_BLOCK characters are an unreadable
                # call, and the rest is read as words (the same cut however the reply streams)
                self._block.append(s[i : i + room])
                self._close_block(complete=False, readable=False)
                i += room
                continue
            self._block.append(s[i:j])
            self._block_size += j - i
            if not closer:
                self._held = s[j:]
                return
            self._close_block(complete=True)
            i = j + len(closer)

    def _words(self, text: str) -> None:
        if not text:
            return
        if self._start == _PASSING:
            self._text(self._trail.feed(text))
            return
        # the reply may still be nothing but a call's JSON: its first character decides
        self._start_text.append(text)
        if self._start == _UNDECIDED:
            head = text.lstrip()
            if head:
                self._start = _HOLDING
                if head[0] not in "{[":
                    self._stop_holding()

    def _stop_holding(self) -> None:
        if self._start != _PASSING:
            self._start = _PASSING
            held, self._start_text = "".join(self._start_text), []
            self._text(self._trail.feed(held))

    def _close_block(self, *, complete: bool, readable: bool = True) -> None:
        opener, body = self._opener, "".join(self._block)
        self._opener, self._block, self._block_size = "", [], 0
        if opener == "<tool_response>":
            self._notice(
                "ignored-tool-response",
                "the model wrote a tool response itself; it was not shown or believed",
            )
            return
        raw = opener + body + (_BLOCKS[opener] if complete else "")
        self._stop_holding()
        self._text(self._trail.flush())  # a block follows: what was held is not the last
        if self.strict and opener != "<tool_call>":  # not the form asked for: text
            self._stop_holding()
            self._text(raw)
            return
        calls: list[ToolCall] | None
        if opener == "```":  # a fence that is not a call is text, whatever its length
            calls = self._fenced(body) if readable else None
            if calls is None:
                self._stop_holding()
                self._text(raw)
                return
        elif not readable:
            calls = None
        elif opener == "<tool_call>":
            calls = self._tagged(body)
        else:
            call = self._function(body)
            calls = None if call is None else [call]
        self._stop_holding()
        if not calls:
            self._emit(None, raw)  # (an unreadable call: its result says how to write one)
        for call in calls or ():
            self._emit(call, raw)

    def _emit(self, call: ToolCall | None, raw: str) -> None:
        if call is None:
            call = ToolCall("", UNREADABLE, {}, raw)
        index, cid = self._new_call(call.name)
        self._args(index, call.arguments_text)
        self._end(index, replace(call, id=cid))
        self._found = True

    # -- the shapes

    def _json_calls(self, text: str, shape: CallShape) -> list[ToolCall] | None:
        """The call the block's JSON is; unless strict, the calls of a list of call objects
        in it (``recovered-call-list``, as the engine reads one where a family frames one
        call). None when it is no call, or an item is none. The repairs the block's JSON
        took are named once, when every call in it is read."""
        if self.strict:
            shape = _ASKED
        obj, repairs, raw = _almost_json(text.strip(), strict=self.strict)
        items = obj if isinstance(obj, list) and not self.strict else [obj]
        found = [shape.read(item, self.tools) for item in items]
        if not items or any(isinstance(f, str) for f in found):
            return None
        calls = [
            ToolCall("", f[0], f[1], json.dumps(f[1], ensure_ascii=False))
            for f in found
            if not isinstance(f, str)
        ]
        names = ", ".join(dict.fromkeys(call.name for call in calls))
        if raw:
            raw_controls_notice(self, names)
        if repairs:
            self._notice(
                "recovered-repairs",
                f"the call to {names} was read with repairs: {', '.join(repairs)}",
            )
        if any(_loose_keys(item) for item in items):
            self._notice(
                "recovered-call-keys",
                f"the call to {names} gave its arguments under another key or as text",
            )
        if items is not obj or not isinstance(obj, list):
            return calls
        self._notice("recovered-call-list", f"read a list of calls to {names[:300]} in one block")
        return calls

    def _tagged(self, body: str) -> list[ToolCall] | None:
        inner = body.strip()
        if inner.startswith("<function="):
            if self.strict:
                return None
            call = self._function(inner[len("<function=") :].removesuffix("</function>"))
            return None if call is None else [call]
        return self._json_calls(inner, _SHAPE)

    def _function(self, body: str) -> ToolCall | None:
        call = self._function_call(body)
        if call is not None:
            self._notice(
                "recovered-function-tag", f"read a call to {call.name} written as <function=…>"
            )
        return call

    def _function_call(self, body: str) -> ToolCall | None:
        name, sep, rest = body.partition(">")
        name = name.strip()
        if not sep or not name or any(c.isspace() for c in name):
            return None
        rest = rest.strip()
        if rest.startswith("{"):
            args, repairs, raw = _almost_json(rest)
            if not isinstance(args, dict):
                return None
            if raw:
                raw_controls_notice(self, name)
            if repairs:
                self._notice(
                    "recovered-repairs",
                    f"the call to {name} was read with repairs: {', '.join(repairs)}",
                )
            return ToolCall("", name, args, json.dumps(args, ensure_ascii=False))
        xml = f"<tool_call>\n<function={name}>\n{rest}\n</function>\n</tool_call>"
        parsed = _QWEN_XML.parse(xml)
        return parsed.calls[0] if len(parsed.calls) == 1 else None

    def _fenced(self, body: str) -> list[ToolCall] | None:
        m = _FENCE_INFO.match(body)
        info = m.group(1).lower() if m else ""
        if info not in ("", "json", "tool_call"):
            return None
        calls = self._json_calls(body[m.end() :] if m else body, _FENCED)
        if calls:
            self._notice(
                "recovered-fenced-json", f"read a call to {calls[0].name} from a code fence"
            )
        return calls

    def _content_end(self) -> None:
        if self._opener:
            self._block.append(self._take_held())
            self._close_block(complete=False)
        else:
            self._words(self._take_held())
        if self._start != _PASSING:
            whole = "".join(self._start_text)
            found = None
            if not self._found and not self.strict:
                found = recover(whole, self.tools_given, lenient=True)
            if found is not None:
                self._start, self._start_text = _PASSING, []
                shape = found.shape
                self._notice(recovered(shape), f"read a call the model wrote as {shape}")
                for notice in found.notices():
                    self._out.append(notice)
                for name, arguments, text in found.calls:
                    self._emit(ToolCall("", name, arguments, text), whole)
                return
            self._stop_holding()
        end_trailing(self, self._trail, self._whole_reply)

    def _whole_reply(self) -> ReplyStream:
        """A reader of the held block as a whole reply, with no trailing block of its own."""
        reader = Words().stream(self.tools_given, make_id=self._make_id)
        assert isinstance(reader, WordsStream)
        reader._trail = TrailingBlock(brackets=False)
        return reader


class Words(Family):
    """Not a model's own grammar: the one toolwire asks for when it gives tools in words."""

    name = "words"
    label = "tools in words (Hermes form, read leniently)"
    # the <tool_response> a model writes to itself is dropped
    drops_tokens = True
    markers = tuple(_BLOCKS)
    stream_class = WordsStream

    def stream(
        self,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        strict: bool = False,
        **kwargs: Any,
    ) -> ReplyStream:
        """A reader for one reply; ``strict`` reads only the form the model was asked for."""
        s = super().stream(tools, **kwargs)
        assert isinstance(s, WordsStream)
        s.tools_given = tools
        s.strict = strict
        s._trail = TrailingBlock(brackets=not strict)
        return s
