"""What every tool-call family shares: the result type, limits, the declared names, ids.

A family is a grammar. Its reply stream is the one implementation of that grammar: the
one-shot :meth:`Family.parse` feeds the whole reply through the same state machine, so the
two can never disagree, and tests check that every way of cutting a reply into chunks gives
the same events as feeding it whole.
"""

from __future__ import annotations

import json
import re
import secrets
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, ClassVar

from ..errors import LimitError, UsageError
from ..events import (
    CallAbort,
    CallArgsDelta,
    CallEnd,
    CallStart,
    Event,
    Notice,
    NoticeCode,
    ReasoningDelta,
    TextDelta,
)
from ..messages import ToolCall
from ..templates.shaping import CallIds
from .grammar import Form
from .reasoning import ReasoningSplitter, ReasoningTags
from .samples import Sample, sample_arguments

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_REPLY_CHARS",
    "Family",
    "IdMaker",
    "ParseResult",
    "ReplyStream",
    "ToolIndex",
    "assemble",
    "json_text",
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
#: The same, taking raw line breaks and tabs inside strings (``json``'s ``strict=False``).
_RAW_DECODER = json.JSONDecoder(parse_constant=_no_constants, parse_float=_finite, strict=False)
_OTHER_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def json_text(text: str, ascii_only: bool = False) -> str:
    """``text`` as the inside of a JSON string (escaped, without its quotes): the standard
    library's own encoder, in C, what ``json.dumps`` calls for a string without setting an
    encoder up each time (the readers pass every piece of every string value through it)."""
    encode = encode_basestring_ascii if ascii_only else encode_basestring
    return str(encode(text))[1:-1]


def loads_json(text: str, max_depth: int = MAX_JSON_DEPTH, *, raw_controls: bool = False) -> Any:
    """Strict JSON (no NaN/Infinity), refusing deep nesting before ``json`` can recurse.

    With ``raw_controls``, a raw line break, carriage return or tab inside a string is read
    as its escape (a model writing code into an argument); any other control character is
    still refused. Raises ``ValueError`` for anything that is not JSON within the limits.
    """
    if _too_deep(text, max_depth):
        raise ValueError(f"nested deeper than {max_depth}")
    if raw_controls and not _OTHER_CONTROLS.search(text):
        return _RAW_DECODER.decode(text)
    return _DECODER.decode(text)


# --------------------------------------------------------------------------- tools


class ToolIndex:
    """The declared tools by name, built once per turn: what every reader, check and
    surface asks of a tool list (is this name declared? what is its schema?), so no other
    code walks the OpenAI-shaped list or guesses between its two forms.

    Nothing here types a value: arguments are typed once, at the reply pipeline's end
    (:func:`toolwire.pipeline.end.prepare_call`).
    """

    __slots__ = ("_schemas", "known")

    def __init__(self, tools: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None) -> None:
        #: False when no tool list was given at all (a reader then takes any name).
        self.known = tools is not None
        self._schemas: dict[str, Mapping[str, Any]] = {}
        if isinstance(tools, Mapping):  # one tool given bare, not in a list
            tools = [tools]
        for tool in tools or ():
            fn = tool.get("function", tool) if isinstance(tool, Mapping) else None
            if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
                params = fn.get("parameters")
                self._schemas.setdefault(
                    fn["name"], params if isinstance(params, Mapping) else {"type": "object"}
                )

    @classmethod
    def of(cls, tools: ToolIndex | Sequence[Mapping[str, Any]] | None) -> ToolIndex:
        """``tools`` as an index: the one given, or one built now."""
        return tools if isinstance(tools, ToolIndex) else cls(tools)

    def has(self, name: str) -> bool:
        return name in self._schemas

    def schema(self, name: str) -> Mapping[str, Any] | None:
        """The parameters schema of the tool named ``name`` (None: not declared)."""
        return self._schemas.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        """The declared names, in the order given."""
        return tuple(self._schemas)

    def __len__(self) -> int:
        return len(self._schemas)


# --------------------------------------------------------------------------- streams


class ReplyStream:
    """Incremental reader of one reply; subclasses implement the family's grammar.

    ``feed`` takes text chunks of any size and returns the events they complete;
    ``finish`` ends the reply and releases anything held back. Work is linear in the
    reply's length: state carries over between chunks and nothing is re-read.

    ``strict`` reads exactly the family's grammar: every tolerance a family has for a reply
    that strays from it (each named in a notice when used) is then refused.
    """

    #: The text that opens a call anywhere in the reply, for grammars that have one. Unless
    #: strict, it also ends a thinking block when it starts a line there (a named repair).
    marker: ClassVar[str] = ""

    @property
    def thinking_stops(self) -> tuple[str, ...]:
        """The markers that end a thinking block the model never closed when a call follows
        (see :mod:`.reasoning`): the family's marker."""
        return (self.marker,) if self.marker else ()

    @property
    def call_stops(self) -> tuple[str, ...]:
        """What a call's JSON string cut short (a raw line break in it) never runs across:
        the markers that open calls, so a call after a broken one is still seen."""
        return (self.marker,) if self.marker else ()

    #: What splits thinking off the reply before the grammar reads it (MiniMax M3 has its
    #: own; every splitter recognises every family's tags unless given others).
    splitter_class: ClassVar[type[ReasoningSplitter]] = ReasoningSplitter
    #: False for a grammar that reads the thinking a prompt opened itself (on its channels,
    #: in its blocks): the splitter is then not opened, and the grammar reads
    #: ``reasoning_open``.
    splitter_opens: ClassVar[bool] = True

    def __init__(
        self,
        tools: ToolIndex,
        *,
        reasoning_open: bool = False,
        make_id: IdMaker | None = None,
        max_chars: int = MAX_REPLY_CHARS,
        strict: bool = False,
    ) -> None:
        self.tools = tools
        self.strict = strict
        self._make_id = make_id or random_call_id
        self._out: list[Event] = []
        ends = () if strict else self.thinking_stops
        #: The generation prompt opened a thinking block: the reply starts inside it.
        self.reasoning_open = reasoning_open
        self._reasoning = self.splitter_class(
            opened=reasoning_open and self.splitter_opens, call_markers=ends
        )
        self._told_call_ended = False
        #: Text outside calls is thinking (a call read in a thinking block never closed).
        self._as_reasoning = False
        self._ids: set[str] = set()
        self._size = 0
        self._max_chars = max_chars
        self._calls = 0
        self._finished = False
        #: A trailing piece of the last chunk held back: the next chunk decides what it is.
        self._held = ""

    # -- public

    def feed(self, chunk: str) -> list[Event]:
        size = self._size + len(chunk)
        if self._finished or size > self._max_chars:  # (checked here: a step less a chunk)
            self._check(len(chunk))
        self._size = size
        reasoning = self._reasoning
        if reasoning.passing and (self._told_call_ended or not reasoning.ended_by_call):
            if chunk:  # (past the thinking: the answer's, a step less a chunk; see _split)
                self._content(chunk)
        else:
            self._split(reasoning.feed(chunk))
        out, self._out = self._out, []  # (_take, inline)
        return out

    def _check(self, more: int) -> None:
        """Refuse a chunk of ``more`` characters before reading it: after ``finish()``, or
        when the reply would pass its limit (a stream that holds a piece back before it
        feeds it on counts that piece in ``more``)."""
        if self._finished:
            raise UsageError("feed() after finish(): a reply stream reads one reply")
        if self._size + more > self._max_chars:
            self._size = self._max_chars + 1  # refused once, refused from then on
            raise LimitError(f"the reply is longer than {self._max_chars} characters")

    def finish(self) -> list[Event]:
        if self._finished:
            return []
        self._finished = True
        self._split(self._reasoning.finish())
        unclosed = self._reasoning.unclosed_call
        if unclosed:
            # a call written in a thinking block that never closed: read from its marker;
            # the text around its calls is the thinking it was written in
            self._notice(
                "recovered-call-ended-thinking",
                f"{self.marker} inside a thinking block that never closed: read as a call",
            )
            self._as_reasoning = True
            self._content(unclosed)
        self._content_end()
        self._as_reasoning = False
        return self._take()

    def _split(self, pieces: list[tuple[bool, str]]) -> None:
        """Pass thinking on as such and the rest through the grammar."""
        for is_reasoning, piece in pieces:
            if is_reasoning:
                self._out.append(ReasoningDelta(piece))
                continue
            if self._reasoning.ended_by_call and not self._told_call_ended:
                self._told_call_ended = True
                self._notice(
                    "recovered-call-ended-thinking",
                    f"{self.marker} ended the thinking block: what follows is read as a call",
                )
            if piece:
                self._content(piece)

    # -- for subclasses

    def _content(self, text: str) -> None:
        raise NotImplementedError

    def _content_end(self) -> None:
        raise NotImplementedError

    def _take_held(self) -> str:
        """The piece held back from the last chunk, no longer held."""
        held, self._held = self._held, ""
        return held

    def _take(self) -> list[Event]:
        out, self._out = self._out, []
        return out

    def _text(self, text: str) -> None:
        if text:
            self._out.append(ReasoningDelta(text) if self._as_reasoning else TextDelta(text))

    def _new_call(self, name: str, call_id: str | None = None) -> tuple[int, str]:
        """Announce a call; the model's own ``call_id`` is kept unless an earlier call of this
        reply has it (two calls with one id could not be told apart)."""
        index = self._calls
        self._calls += 1
        cid = call_id if call_id and call_id not in self._ids else self._make_id(index)
        self._ids.add(cid)
        self._out.append(CallStart(index, cid, name))
        return index, cid

    def _args(self, index: int, text: str) -> None:
        if text:
            self._out.append(CallArgsDelta(index, text))

    def _end(self, index: int, call: ToolCall) -> None:
        self._out.append(CallEnd(index, call))

    def _abort(self, index: int, call_id: str, reason: str) -> None:
        self._out.append(CallAbort(index, call_id, reason))

    def _notice(self, code: NoticeCode, message: str) -> None:
        self._out.append(Notice(code, message))


class Family:
    """A tool-call grammar: how one family of models writes calls in its reply."""

    #: Registry name, e.g. ``"hermes"``.
    name: ClassVar[str]
    #: A human label naming the models, for ``detect --json`` and reports.
    label: ClassVar[str]
    #: The texts that open a call.
    markers: ClassVar[tuple[str, ...]]
    #: Texts that a template's prompt WITH tools shows and its prompt without tools does not,
    #: stating this family's format in words (Granite 3.3: "respond only with <|tool_call|>").
    #: Detection uses them only for a template whose rendered calls no family reads (one that
    #: renders no calls at all): never from template source, only from rendered prompts.
    prompt_markers: ClassVar[tuple[str, ...]] = ()
    #: How call ids must look in a prompt for this family's templates ("keep", "alnum9" or
    #: "functions", see :func:`~toolwire.templates.shaping.shape_messages`).
    call_ids: ClassVar[CallIds] = "keep"
    #: True when the family's templates render one call per assistant message: a turn of
    #: several calls is rendered as one message per call, each followed by its result.
    one_call_per_message: ClassVar[bool] = False
    #: The thinking and answer tags its models write (every stream recognises the union of
    #: every family's: formats/registry.py ``reasoning_tags``).
    reasoning: ClassVar[ReasoningTags] = ReasoningTags()
    #: The token texts that end its models' turns (detection cuts a turn at them when a
    #: template's end is not otherwise known; formats/registry.py ``end_tokens``).
    end_tokens: ClassVar[tuple[str, ...]] = ()
    #: Special tokens its calls are written with beyond its ``markers``: a decoder that
    #: skipped special tokens would lose them, so they must be kept when generating.
    kept_tokens: ClassVar[tuple[str, ...]] = ()
    #: True when its grammar drops tokens of its own from the text (channel headers, role
    #: tokens), so not every character a model writes reaches the reply's text.
    drops_tokens: ClassVar[bool] = False
    #: Writers of one sample call each, in every form the family's models write (the
    #: cross-family matrix, the streaming tests and the stream benchmark read them).
    samples: ClassVar[tuple[Sample, ...]] = ()
    #: The stream class implementing the grammar.
    stream_class: ClassVar[type[ReplyStream]]
    grammar: ClassVar[Form | None] = None

    @property
    def models(self) -> str:
        """The models, as the label names them in its closing parentheses (the whole label
        when it names none), for ``toolwire families``."""
        found = re.search(r"\(([^()]*)\)\s*\Z", self.label)
        return found.group(1) if found else self.label

    @property
    def special_tokens(self) -> tuple[str, ...]:
        """The tokens a call of this family needs kept: its markers and ``kept_tokens``."""
        return tuple(dict.fromkeys((*self.markers, *self.kept_tokens)))

    def sample(
        self,
        index: int = 1,
        name: str = "write_file",
        arguments: Mapping[str, Any] | None = None,
    ) -> str:
        """Sample call ``index`` in this family's grammar, its forms taken in turn
        (``arguments``: :func:`~toolwire.formats.samples.sample_arguments`)."""
        if not self.samples:
            raise NotImplementedError(f"{self.name} declares no sample call")
        args = sample_arguments(index) if arguments is None else arguments
        return self.samples[index % len(self.samples)](name, args, index)

    def stream(
        self,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        reasoning_open: bool = False,
        make_id: IdMaker | None = None,
        max_chars: int = MAX_REPLY_CHARS,
        strict: bool = False,
    ) -> ReplyStream:
        """A fresh incremental reader for one reply; ``strict`` refuses every tolerance."""
        return self.stream_class(
            ToolIndex.of(tools),
            reasoning_open=reasoning_open,
            make_id=make_id,
            max_chars=max_chars,
            strict=strict,
        )

    def parse(
        self,
        text: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        reasoning_open: bool = False,
        make_id: IdMaker | None = None,
        max_chars: int = MAX_REPLY_CHARS,
        strict: bool = False,
    ) -> ParseResult:
        """Read a whole reply: content, calls (arguments as written, untyped), reasoning."""
        s = self.stream(
            tools,
            reasoning_open=reasoning_open,
            make_id=make_id,
            max_chars=max_chars,
            strict=strict,
        )
        events = s.feed(text)
        events += s.finish()
        return assemble(events)

    def __repr__(self) -> str:
        return f"<format {self.name}>"
