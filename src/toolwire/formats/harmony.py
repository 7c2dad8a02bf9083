"""OpenAI gpt-oss "harmony": a reply is a run of messages on channels, calls among them.

The generation prompt ends ``<|start|>assistant``; the model goes on with the rest of the
message's header and writes one message or several::

    <|channel|>analysis<|message|>thinking…<|end|>
    <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}
    <|call|><|start|>assistant<|channel|>final<|message|>the answer<|return|>

(written on several lines here: no newline separates them). A header holds a channel
(``<|channel|>analysis``), maybe a recipient (``to=functions.NAME``, written before the
channel too: the template renders a past call as
`` to=functions.NAME<|channel|>commentary json<|message|>``) and maybe a content type
(``json``, ``<|constrain|>json``). A message to ``functions.NAME`` is a call whose body is its
arguments, one JSON object, passed on as written. Otherwise ``analysis`` is reasoning and
``final`` or ``commentary`` (the preamble the user sees) is the reply's text; a message to
another recipient (a built-in tool such as ``python`` or ``browser.search``, which toolwire
does not run) stays reply text, with a notice. ``<|end|>``, ``<|call|>`` and ``<|return|>``
end a message (blanks between a call and its end token are skipped); a reply may also stop
inside one (the runtime drops the stop token). Text before any header is reply text.

:class:`ChannelStream` is the machine every grammar of that kind shares (gpt-oss, Muse
Glimmer, Kimi K3): text on the current channel streams out at once, a header is read whole
(it is short, and bounded) and decides what the next message is, and a call's message is
read by a :class:`~toolwire.formats.markerstream.Body`, whose text goes back to the reply
with a ``call-not-read`` notice when it is not a call. No header reaches the reply's text,
except inside such a notice's returned text.
"""

from __future__ import annotations

import re
from typing import ClassVar, NamedTuple

from ..events import ReasoningDelta
from ..messages import ToolCall
from . import grammar_forms as forms
from .base import MAX_REPLY_CHARS, Family, IdMaker, ToolIndex
from .jsonscan import ObjectScanner
from .markerstream import DONE, MAX_HELD, OPEN, WS, Body, MarkerStream, expect_any
from .scan import Markers
from .textargs import MAX_NAME

__all__ = ["ChannelStream", "GptOss", "Route", "valid_name"]

#: The longest header read; a longer one is no header and stays text.
MAX_HEADER = 512

_START, _TEXT, _HEADER, _CALL, _AFTER_CALL = range(5)
_BAD_NAME = re.compile(r"[\s<>{}\[\]\"'=]")


def valid_name(name: str) -> bool:
    """A tool's name as a header or an attribute gives it: short, no blanks, no markup."""
    return 0 < len(name) <= MAX_NAME and not _BAD_NAME.search(name)


class Route(NamedTuple):
    """What a header makes of the message after it."""

    #: ``"text"`` (the reply's text), ``"reasoning"``, ``"call"`` (``body`` reads it) or
    #: ``"bad"`` (not a header this grammar writes: it stays text, ``note`` says why).
    kind: str
    body: Body | None = None
    #: Why, for a bad header; for a text message, something the user should know.
    note: str = ""


class ChannelStream(MarkerStream):
    """A reply made of messages, each opened by a header that names its channel."""

    #: Tokens that open a header wherever they appear.
    opens: ClassVar[tuple[str, ...]]
    #: Tokens that end a message; what follows is reply text until the next header.
    ends: ClassVar[tuple[str, ...]]
    #: The token that ends a header.
    header_end: ClassVar[str]
    #: Texts that are the rest of a header at the very start of the reply (the generation
    #: prompt opened the message); read as part of that header.
    leading: ClassVar[tuple[str, ...]] = ()
    _in_text: ClassVar[Markers]
    _in_header: ClassVar[Markers]

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "opens" in cls.__dict__ or "ends" in cls.__dict__:
            cls._in_text = Markers((*cls.opens, *cls.ends))
        if "header_end" in cls.__dict__:
            cls._in_header = Markers((cls.header_end,))

    def __init__(
        self,
        tools: ToolIndex,
        *,
        reasoning_open: bool = False,
        make_id: IdMaker | None = None,
        max_chars: int = MAX_REPLY_CHARS,
        strict: bool = False,
    ) -> None:
        # The channels say what is reasoning: a prompt that opened the thinking channel
        # starts the reply on it, and no <think> splitter reads the reply first.
        super().__init__(tools, make_id=make_id, max_chars=max_chars, strict=strict)
        self._mode = _START if self.leading else _TEXT
        self._thinking = reasoning_open
        self._opener = ""
        self._header: list[str] = []
        self._header_size = 0
        self._raw = []

    def route(self, opener: str, header: str) -> Route:
        """What the header ``opener + header`` (its end token cut off) opens."""
        raise NotImplementedError

    # -- the machine

    def _content(self, text: str) -> None:
        s = self._take_held() + text
        i = 0
        n = len(s)
        while i < n:
            mode = self._mode
            if mode == _TEXT:
                i = self._read_text(s, i)
            elif mode == _HEADER:
                i = self._read_header(s, i)
            elif mode == _CALL:
                i = self._read_call(s, i)
            elif mode == _AFTER_CALL:  # blanks after a call, before its message's end
                if s[i] in WS:
                    i += 1
                else:
                    self._mode = _TEXT
            else:  # _START: the rest of the prompt's header, or plain text
                status, _j, _literal = expect_any(s, i, self.leading)
                if status == OPEN:
                    self._held = s[i:]
                    return
                if status == DONE:
                    self._begin_header("")
                else:
                    self._mode = _TEXT

    def _emit(self, text: str) -> None:
        if not text:
            return
        if self._thinking:
            self._out.append(ReasoningDelta(text))
        else:
            self._text(text)

    def _read_text(self, s: str, i: int) -> int:
        j, marker = self._in_text.scan(s, i)
        self._emit(s[i:j])
        if not marker:
            self._held = s[j:]
            return len(s)
        if marker in self.ends:
            self._thinking = False
        else:
            self._begin_header(marker)
        return j + len(marker)

    def _begin_header(self, opener: str) -> None:
        self._mode = _HEADER
        self._opener = opener
        self._header = []
        self._header_size = 0

    def _read_header(self, s: str, i: int) -> int:
        room = MAX_HEADER - self._header_size
        # the end is looked for only as far as a header may reach: else a reply of many
        # header openers, none ended, is read once per opener (quadratic)
        reach = i + room + len(self.header_end)
        j, end = self._in_header.scan(s, i, reach)
        if not end and reach < len(s):
            j = len(s)  # no end within reach: longer than any header
        if j - i > room:  # cut where it outgrows the limit, however the reply was chunked
            self._header.append(s[i : i + room])
            self._not_a_header(
                "a header longer than any this grammar writes",
                self._opener + "".join(self._header),
            )
            return i + room
        self._header.append(s[i:j])
        self._header_size += j - i
        if not end:
            self._held = s[j:]
            return len(s)
        header = "".join(self._header)
        self._header = []
        route = self.route(self._opener, header)
        raw = self._opener + header + end
        self._mode = _TEXT
        self._thinking = route.kind == "reasoning"
        if route.kind == "call":
            assert route.body is not None
            self._body = route.body
            self._raw = [raw]
            self._mode = _CALL
        elif route.kind == "bad":
            self._not_a_header(route.note, raw)
        elif route.note:
            self._notice("call-not-read", route.note)
        return j + len(end)

    def _not_a_header(self, why: str, text: str) -> None:
        """The header read is none: its ``text`` goes back to the reply, with a notice."""
        self._header = []
        self._mode = _TEXT
        self._thinking = False
        self._notice(
            "call-not-read", f"{text[:60]!r} is not a message header ({why}); it stays text"
        )
        self._text(text)

    def _read_call(self, s: str, i: int) -> int:
        body = self._body
        assert body is not None
        k = body.feed(s, i)
        if body.status == OPEN:
            self._raw.append(s[i:k])
            if len(s) - k > MAX_HELD:  # a body must not hoard text
                raise AssertionError("call body held back too much")
            self._held = s[k:]
            return len(s)
        if body.status != DONE:
            self._raw.append(s[i:k])
        self._mode = _AFTER_CALL if body.status == DONE else _TEXT
        self._close(body)
        self._thinking = False
        return k

    def _content_end(self) -> None:
        held = self._take_held()
        if self._mode == _CALL:
            self._held = held
            super()._content_end()
        elif self._mode == _HEADER:
            self._not_a_header(
                "the reply ended inside it", self._opener + "".join(self._header) + held
            )
        elif self._mode in (_START, _AFTER_CALL):
            self._text(held)
        else:
            self._emit(held)


# --------------------------------------------------------------------------- gpt-oss

#: One piece of a header: a channel, a recipient, a constrained or a bare content type.
_PIECE = re.compile(
    r"\s*(?:<\|channel\|>([^\s<]+)|to=([^\s<]+)|<\|constrain\|>([^\s<]+)|([A-Za-z][\w.+-]*))"
)
_ROLE = re.compile(r"assistant(?=\s|<\||\Z)")
_FUNCTIONS = "functions."


def read_role(opener: str, header: str) -> tuple[str, str] | None:
    """``(opener, header)`` past the role a ``<|start|>`` names; None when it is not the
    assistant's (the model writes only its own messages)."""
    if opener != "<|start|>":
        return opener, header
    m = _ROLE.match(header)
    return None if m is None else ("", header[m.end() :])


class _ArgumentsBody(Body):
    """A call's message: its arguments, one JSON object, passed on as written."""

    def __init__(self, stream: MarkerStream, name: str) -> None:
        super().__init__(stream)
        self.name = name
        self.index, self.id = self.announce(name)
        self.scanner = ObjectScanner()

    def step(self, s: str, i: int) -> tuple[int, bool]:
        if self.state == 0 and s[i] in WS:
            return i + 1, True
        self.state = 1
        i = self.feed_args(self.scanner, self.index, s, i)
        if self.status != OPEN or not self.scanner.done:
            return i, False
        text = self.scanner.text()
        args = self.json_args(text, i)
        if args is not None:
            self.calls.append((self.index, ToolCall(self.id, self.name, args, text.strip())))
            self.status = DONE
        return i, False


class HarmonyStream(ChannelStream):
    marker = "to=functions."
    opens = ("<|start|>", "<|channel|>")
    ends = ("<|end|>", "<|call|>", "<|return|>")
    header_end = "<|message|>"
    leading = (" to=",)

    def route(self, opener: str, header: str) -> Route:
        found = read_role(opener, header)
        if found is None:
            return Route("bad", note="not an assistant message")
        opener, text = found
        text = opener + text  # a <|channel|> opener is the header's first piece
        channel = recipient = ""
        pos = 0
        while pos < len(text) and not text[pos:].isspace():
            m = _PIECE.match(text, pos)
            if m is None:
                return Route("bad", note=f"unexpected {text[pos : pos + 20]!r}")
            channel = m.group(1) or channel
            recipient = m.group(2) or recipient
            pos = m.end()
        if recipient.startswith(_FUNCTIONS):
            name = recipient[len(_FUNCTIONS) :]
            if not valid_name(name):
                return Route("bad", note=f"a malformed tool name {name[:40]!r}")
            return Route("call", _ArgumentsBody(self, name))
        if recipient and recipient != "assistant":
            note = f"a message to {recipient}, which is not a declared function, stays text"
            return Route("text", note=note)
        return Route("reasoning" if channel == "analysis" else "text")


class GptOss(Family):
    name = "gpt-oss"
    label = "OpenAI harmony <|channel|>… to=functions.NAME <|message|>{JSON} (gpt-oss)"
    markers = ("<|channel|>", "<|start|>")
    stream_class = HarmonyStream
    grammar = forms.GPT_OSS
    one_call_per_message = True
