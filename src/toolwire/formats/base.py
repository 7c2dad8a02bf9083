"""What every tool-call family shares: the result type, limits, typing by schema, ids.

A family is a grammar. Its reply stream is the one implementation of that grammar: the
one-shot :meth:`Family.parse` feeds the whole reply through the same state machine, so the
two can never disagree, and tests check that every way of cutting a reply into chunks gives
the same events as feeding it whole.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import LimitError
from ..events import (
    CallAbort,
    CallArgsDelta,
    CallEnd,
    CallStart,
    Event,
    Notice,
    ReasoningDelta,
    TextDelta,
)
from ..messages import ToolCall
from ..templates.shaping import CallIds
from .reasoning import ReasoningSplitter

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_REPLY_CHARS",
    "Family",
    "IdMaker",
    "ParseResult",
    "ReplyStream",
    "ToolIndex",
    "assemble",
    "loads_json",
    "random_call_id",
]

#: A reply longer than this many characters raises :class:`~toolwire.errors.LimitError`.
MAX_REPLY_CHARS = 16 * 1024 * 1024
#: JSON nested deeper than this inside a call is not a call (and is never handed to ``json``).
MAX_JSON_DEPTH = 100

IdMaker = Callable[[int], str]

_ALNUM = string.ascii_letters + string.digits


def random_call_id(index: int) -> str:
    """A fresh call id, 9 alphanumerics: unique enough, and acceptable to every template."""
    del index
    return "".join(secrets.choice(_ALNUM) for _ in range(9))


@dataclass(frozen=True)
class ParseResult:
    """A reply read in one family's grammar."""

    content: str
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: str = ""
    #: What the reader wants the user to know, e.g. that call markup stayed text.
    notices: list[str] = field(default_factory=list)


def assemble(events: Iterable[Event]) -> ParseResult:
    """Fold a stream's events into the result a one-shot parse gives."""
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    notices: list[str] = []
    for event in events:
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            reasoning.append(event.text)
        elif isinstance(event, CallEnd):
            calls.append(event.call)
        elif isinstance(event, Notice):
            notices.append(event.message)
    return ParseResult("".join(text), calls, "".join(reasoning), notices)


_DEPTH_TOKENS = re.compile(r'["\\\[\]{}]')


def _too_deep(text: str, limit: int) -> bool:
    depth = 0
    in_string = False
    pos = 0
    find = _DEPTH_TOKENS.search
    while True:
        m = find(text, pos)
        if m is None:
            return False
        c = m.group()
        pos = m.end()
        if in_string:
            if c == "\\":
                pos += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > limit:
                return True
        elif c in "]}":
            depth -= 1


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is too large for a number")
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constants, parse_float=_finite)


def loads_json(text: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON (no NaN/Infinity), refusing deep nesting before ``json`` can recurse.

    Raises ``ValueError`` for anything that is not JSON within the limits.
    """
    if _too_deep(text, max_depth):
        raise ValueError(f"nested deeper than {max_depth}")
    return _DECODER.decode(text)


# --------------------------------------------------------------------------- schemas


class ToolIndex:
    """The declared tools by name, for typing arguments and for families that need names."""

    def __init__(self, tools: Sequence[Mapping[str, Any]] | None) -> None:
        self.known = tools is not None
        self._params: dict[str, Mapping[str, Any]] = {}
        if isinstance(tools, Mapping):  # one tool given bare, not in a list
            tools = [tools]
        for tool in tools or ():
            fn = tool.get("function", tool) if isinstance(tool, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                continue
            params = fn.get("parameters")
            self._params[fn["name"]] = params if isinstance(params, Mapping) else {}

    def has(self, name: str) -> bool:
        return name in self._params

    def param_schema(self, tool: str, param: str) -> Mapping[str, Any] | None:
        """The schema of one parameter, or None when the tool or parameter is unknown."""
        params = self._params.get(tool)
        if params is None:
            return None
        props = params.get("properties")
        if not isinstance(props, Mapping):
            return None
        schema = props.get(param)
        return schema if isinstance(schema, Mapping) else None


_MAX_SCHEMA_DEPTH = 32


def _types(schema: Mapping[str, Any], depth: int = 0) -> set[str] | None:
    """The JSON types a schema admits, or None when it does not say plainly."""
    if depth > _MAX_SCHEMA_DEPTH:
        return None
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list) and all(isinstance(x, str) for x in t):
        return set(t)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            found: set[str] = set()
            for option in options:
                sub = _types(option, depth + 1) if isinstance(option, Mapping) else None
                if sub is None:
                    return None
                found |= sub
            return found
    if "enum" in schema and isinstance(schema["enum"], list):
        kinds = {_json_type(v) for v in schema["enum"]}
        return kinds
    return None


def _json_type(value: Any) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    return "object"


def wants_text(schema: Mapping[str, Any] | None) -> bool:
    """True when a value for this schema is text as written (or the schema is unknown)."""
    if schema is None:
        return True
    types = _types(schema)
    return types is not None and types <= {"string", "null"} and "string" in types


_PY_LITERALS = {"True": True, "False": False, "None": None}


def type_text(text: str, schema: Mapping[str, Any] | None) -> Any:
    """Type a parameter written as plain text (XML-style grammars) by its schema.

    Text for a string parameter stays verbatim; for any other it is read as JSON, and as a
    Python literal (``True``) because templates render values with Jinja's ``string``
    filter. A value that reads as neither stays text, for the argument checks to reject.
    """
    if wants_text(schema):
        return text
    stripped = text.strip()
    try:
        return loads_json(stripped)
    except (ValueError, RecursionError):
        if stripped in _PY_LITERALS:
            return _PY_LITERALS[stripped]
        return text


def type_arguments(arguments: dict[str, Any], tool: str, index: ToolIndex) -> dict[str, Any]:
    """Type JSON arguments: a string sent for a non-string parameter is read as JSON."""
    typed: dict[str, Any] = {}
    for key, value in arguments.items():
        schema = index.param_schema(tool, key)
        if isinstance(value, str) and schema is not None and not wants_text(schema):
            with contextlib.suppress(ValueError, RecursionError):
                value = loads_json(value.strip())
        typed[key] = value
    return typed


# --------------------------------------------------------------------------- streams


class ReplyStream:
    """Incremental reader of one reply; subclasses implement the family's grammar.

    ``feed`` takes text chunks of any size and returns the events they complete;
    ``finish`` ends the reply and releases anything held back. Work is linear in the
    reply's length: state carries over between chunks and nothing is re-read.
    """

    def __init__(
        self,
        tools: ToolIndex,
        *,
        reasoning_open: bool = False,
        make_id: IdMaker | None = None,
        max_chars: int = MAX_REPLY_CHARS,
    ) -> None:
        self.tools = tools
        self._make_id = make_id or random_call_id
        self._out: list[Event] = []
        self._reasoning = ReasoningSplitter(opened=reasoning_open)
        self._size = 0
        self._max_chars = max_chars
        self._calls = 0
        self._finished = False

    # -- public

    def feed(self, chunk: str) -> list[Event]:
        if self._finished:
            raise RuntimeError("feed() after finish()")
        self._size += len(chunk)
        if self._size > self._max_chars:
            raise LimitError(f"the reply is longer than {self._max_chars} characters")
        for is_reasoning, piece in self._reasoning.feed(chunk):
            if is_reasoning:
                self._out.append(ReasoningDelta(piece))
            elif piece:
                self._content(piece)
        return self._take()

    def finish(self) -> list[Event]:
        if self._finished:
            return []
        self._finished = True
        for is_reasoning, piece in self._reasoning.finish():
            if is_reasoning:
                self._out.append(ReasoningDelta(piece))
            elif piece:
                self._content(piece)
        self._content_end()
        return self._take()

    # -- for subclasses

    def _content(self, text: str) -> None:
        raise NotImplementedError

    def _content_end(self) -> None:
        raise NotImplementedError

    def _take(self) -> list[Event]:
        out, self._out = self._out, []
        return out

    def _text(self, text: str) -> None:
        if text:
            self._out.append(TextDelta(text))

    def _new_call(self, name: str, call_id: str | None = None) -> tuple[int, str]:
        index = self._calls
        self._calls += 1
        cid = call_id or self._make_id(index)
        self._out.append(CallStart(index, cid, name))
        return index, cid

    def _args(self, index: int, text: str) -> None:
        if text:
            self._out.append(CallArgsDelta(index, text))

    def _end(self, index: int, call: ToolCall) -> None:
        self._out.append(CallEnd(index, call))

    def _abort(self, index: int, call_id: str, reason: str) -> None:
        self._out.append(CallAbort(index, call_id, reason))

    def _notice(self, code: str, message: str) -> None:
        self._out.append(Notice(code, message))


class Family:
    """A tool-call grammar: how one family of models writes calls in its reply."""

    #: Registry name, e.g. ``"hermes"``.
    name: ClassVar[str]
    #: A human label naming the models, for ``detect --json`` and reports.
    label: ClassVar[str]
    #: The texts that open a call.
    markers: ClassVar[tuple[str, ...]]
    #: True when a call can only open at the start of the reply (the whole reply is calls).
    start_only: ClassVar[bool] = False
    #: How call ids must look in a prompt for this family's templates ("keep" or "alnum9").
    call_ids: ClassVar[CallIds] = "keep"
    #: The stream class implementing the grammar.
    stream_class: ClassVar[type[ReplyStream]]

    def stream(
        self,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        reasoning_open: bool = False,
        make_id: IdMaker | None = None,
        max_chars: int = MAX_REPLY_CHARS,
    ) -> ReplyStream:
        """A fresh incremental reader for one reply."""
        return self.stream_class(
            ToolIndex(tools), reasoning_open=reasoning_open, make_id=make_id, max_chars=max_chars
        )

    def parse(
        self,
        text: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        reasoning_open: bool = False,
        make_id: IdMaker | None = None,
        max_chars: int = MAX_REPLY_CHARS,
    ) -> ParseResult:
        """Read a whole reply: content, calls (typed by the tools' schemas), reasoning."""
        s = self.stream(tools, reasoning_open=reasoning_open, make_id=make_id, max_chars=max_chars)
        events = s.feed(text)
        events += s.finish()
        return assemble(events)

    def __repr__(self) -> str:
        return f"<format {self.name}>"
