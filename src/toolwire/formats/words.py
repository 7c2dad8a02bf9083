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
to write one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..arguments.read import ReadError, read_json
from ..messages import ToolCall
from .base import Family, ReplyStream, type_arguments
from .drift import recover_calls
from .qwen_xml import QwenXml
from .reasoning import held_suffix

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
_MARKERS = tuple(_BLOCKS)
_MAX_BLOCK = 1024 * 1024
_FENCE_INFO = re.compile(r"\A([A-Za-z0-9_+-]*)[ \t]*\n")


class WordsStream(ReplyStream):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held = ""
        self._block: list[str] | None = None
        self._opener = ""
        self._all: list[str] = []  # the whole reply, for a reply that is only a call
        self._texts: list[str] = []
        self._found = False
        self._holding_start = True
        self._start_text: list[str] = []
        self._tail = ""
        self._size = 0

    # the tools as given, for recover_calls (ReplyStream keeps only an index)
    tools_given: Sequence[Mapping[str, Any]] | None = None

    def _content(self, text: str) -> None:
        self._all.append(text)
        s = self._held + text if self._held else text
        self._held = ""
        i, n = 0, len(s)
        while i < n:
            if self._block is None:
                best = -1
                marker = ""
                for m in _MARKERS:
                    j = s.find(m, i)
                    if j >= 0 and (best < 0 or j < best):
                        best, marker = j, m
                if best < 0:
                    keep = held_suffix(s, _MARKERS, i)
                    self._words(s[i : n - keep])
                    self._held = s[n - keep :]
                    return
                self._words(s[i:best])
                self._block = [marker]
                self._opener = marker
                self._tail = ""
                self._size = 0
                i = best + len(marker)
                continue
            closer = _BLOCKS[self._opener]
            # look for the closer in the new text, with the end of the block so far in
            # front in case the closer was split: nothing is searched twice
            buf = self._tail + s[i:]
            j = buf.find(closer)
            if j < 0:
                self._block.append(s[i:])
                self._size += n - i
                self._tail = buf[-(len(closer) - 1) :] if len(closer) > 1 else ""
                if self._size > _MAX_BLOCK:
                    self._close_block("".join(self._block[1:]), complete=False)
                return
            cut = j - len(self._tail)  # where the closer starts, counted from i
            if cut >= 0:
                self._block.append(s[i : i + cut])
                body = "".join(self._block[1:])
            else:
                body = "".join(self._block[1:])[:cut]
            self._close_block(body, complete=True)
            i += cut + len(closer)

    def _words(self, text: str) -> None:
        if not text:
            return
        if self._holding_start:  # the reply may still be nothing but a call's JSON
            self._start_text.append(text)
            head = "".join(self._start_text).lstrip()
            if not head or head[:1] in "{[":
                return
            self._holding_start = False
            text, self._start_text = "".join(self._start_text), []
        self._texts.append(text)
        self._text(text)

    def _stop_holding(self) -> None:
        if self._holding_start:
            self._holding_start = False
            held, self._start_text = "".join(self._start_text), []
            if held:
                self._texts.append(held)
                self._text(held)

    def _close_block(self, body: str, *, complete: bool) -> None:
        opener = self._opener
        self._block = None
        self._opener = ""
        if opener == "<tool_response>":
            self._notice(
                "ignored-tool-response",
                "the model wrote a tool response itself; it was not shown or believed",
            )
            return
        raw = opener + body + (_BLOCKS[opener] if complete else "")
        if opener == "```":
            call = self._fenced(body)
            if call is None:
                self._stop_holding()
                self._texts.append(raw)
                self._text(raw)
                return
        elif opener == "<tool_call>":
            call = self._tagged(body)
        else:
            call = self._function(body)
        self._stop_holding()
        self._emit(call, raw)

    def _emit(self, call: tuple[str, dict[str, Any], str] | None, raw: str) -> None:
        arguments: dict[str, Any]
        if call is None:
            name, arguments, text = UNREADABLE, {}, raw
        else:
            name, arguments, text = call
        index, cid = self._new_call(name)
        self._args(index, text)
        self._end(index, ToolCall(cid, name, arguments, text))
        self._found = True

    # -- the shapes

    def _json_call(self, text: str) -> tuple[str, dict[str, Any], str] | None:
        try:
            value = read_json(text.strip()).value
        except ReadError:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            return None
        args = value.get("arguments", value.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = read_json(args).value
            except ReadError:
                return None
        if not isinstance(args, dict):
            return None
        name = value["name"]
        return name, type_arguments(args, name, self.tools), json.dumps(args, ensure_ascii=False)

    def _tagged(self, body: str) -> tuple[str, dict[str, Any], str] | None:
        inner = body.strip()
        if inner.startswith("<function="):
            return self._function(inner[len("<function=") :].removesuffix("</function>"))
        return self._json_call(inner)

    def _function(self, body: str) -> tuple[str, dict[str, Any], str] | None:
        name, sep, rest = body.partition(">")
        name = name.strip()
        if not sep or not name or any(c.isspace() for c in name):
            return None
        rest = rest.strip()
        if rest.startswith("{"):
            try:
                args = read_json(rest).value
            except ReadError:
                return None
            if not isinstance(args, dict):
                return None
            typed = type_arguments(args, name, self.tools)
            return name, typed, json.dumps(args, ensure_ascii=False)
        xml = f"<tool_call>\n<function={name}>\n{rest}\n</function>\n</tool_call>"
        parsed = QwenXml().parse(xml, self.tools_given)
        if len(parsed.calls) == 1:
            c = parsed.calls[0]
            return c.name, c.arguments, c.arguments_text
        return None

    def _fenced(self, body: str) -> tuple[str, dict[str, Any], str] | None:
        m = _FENCE_INFO.match(body)
        info = m.group(1).lower() if m else ""
        if info not in ("", "json", "tool_call"):
            return None
        found = self._json_call(body[m.end() :] if m else body)
        if found is None or not self.tools.has(found[0]):
            return None
        return found

    def _content_end(self) -> None:
        if self._block is not None:
            body = "".join(self._block[1:]) + self._held
            self._held = ""
            self._close_block(body, complete=False)
        elif self._held:
            self._words(self._held)
            self._held = ""
        if self._holding_start:
            whole = "".join(self._start_text)
            found = None if self._found else recover_calls(whole, self.tools_given, lenient=True)
            if found is not None:
                self._holding_start = False
                self._start_text = []
                for name, arguments, text in found[0]:
                    self._emit((name, arguments, text), whole)
                return
            self._stop_holding()


class Words(Family):
    """Not a model's own grammar: the one toolwire asks for when it gives tools in words."""

    name = "words"
    label = "tools in words (Hermes form, read leniently)"
    markers = _MARKERS
    stream_class = WordsStream

    def stream(
        self, tools: Sequence[Mapping[str, Any]] | None = None, **kwargs: Any
    ) -> ReplyStream:
        s = super().stream(tools, **kwargs)
        assert isinstance(s, WordsStream)
        s.tools_given = tools
        return s
