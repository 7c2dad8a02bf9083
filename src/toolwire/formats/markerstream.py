"""The shared shape of families whose calls open with a marker anywhere in the reply.

Outside a call, text streams on at once, except a trailing piece that could be the start
of the marker, which is held until the next chunk decides. Inside a call, a family-specific
:class:`Body` reads the call. A body never consumes a partial literal it is waiting for: it
reports where that piece starts and the stream holds it, so nothing is ever re-read and a
failed call gives back its text exactly up to the character that broke it.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from ..messages import ToolCall
from .base import ReplyStream, loads_json
from .jsoncall import JsonCall, raw_controls_notice
from .jsonscan import ObjectScanner
from .scan import Markers, markers

__all__ = ["WS", "Body", "MarkerStream", "expect_any", "expect_literal"]

#: The whitespace a body skips between the pieces of a call.
WS = " \t\r\n"

OPEN, DONE, FAILED = "open", "done", "failed"

#: A body may hold back at most this many characters while it waits for a literal.
MAX_HELD = 64


def expect_literal(s: str, i: int, literal: str) -> tuple[str, int]:
    """Compare ``s[i:]`` with ``literal``: ``(DONE, end)``, ``(OPEN, i)`` or ``(FAILED, i)``."""
    got = s[i : i + len(literal)]
    if got == literal:
        return DONE, i + len(literal)
    if literal.startswith(got):
        return OPEN, i
    return FAILED, i


def expect_any(s: str, i: int, literals: tuple[str, ...]) -> tuple[str, int, str]:
    """Compare ``s[i:]`` with each literal: ``(DONE, end, literal)`` for the one found there,
    ``(OPEN, i, "")`` while the text so far may still become one, else ``(FAILED, i, "")``."""
    waiting = False
    for literal in literals:
        status, j = expect_literal(s, i, literal)
        if status == DONE:
            return DONE, j, literal
        waiting = waiting or status == OPEN
    return (OPEN if waiting else FAILED), i, ""


class Body:
    """Reads one call after its marker. Subclasses set ``status`` and fill ``calls``."""

    def __init__(self, stream: MarkerStream) -> None:
        self.stream = stream
        #: Where the body is in its grammar: each body numbers its states from 0, the first.
        self.state = 0
        self.status = OPEN
        self.reason = ""
        self.started: list[tuple[int, str]] = []  # (index, id) of calls announced
        self.calls: list[tuple[int, ToolCall]] = []
        #: Calls whose JSON strings held raw line breaks or tabs: named when they end.
        self.raw_controls: set[int] = set()

    def feed(self, s: str, i: int) -> int:
        """Consume from ``s[i]``; return where it stopped (see the module docstring).

        Each body reads one step at a time (:meth:`step`) until the text runs out or a
        step says to stop (the call is done, failed, or waits for more).
        """
        n = len(s)
        going = True
        while i < n and going:
            i, going = self.step(s, i)
        return i

    def step(self, s: str, i: int) -> tuple[int, bool]:
        """One step of the grammar from ``s[i]`` (``i < len(s)``): where it got to, and
        whether to go on."""
        raise NotImplementedError

    def expect(self, s: str, i: int, literal: str, problem: str) -> int:
        """The index just past ``literal`` at ``s[i]``; -1 when the text so far is only its
        start (wait for more) or is not it (the body then fails with ``problem``)."""
        status, j = expect_literal(s, i, literal)
        if status == FAILED:
            self.fail(i, problem)
        return j if status == DONE else -1

    def expect_one(
        self, s: str, i: int, literals: tuple[str, ...], problem: str
    ) -> tuple[int, str]:
        """``(end, literal)`` for whichever of ``literals`` is at ``s[i]``; ``(-1, "")`` while
        the text so far may still become one (wait) or none can match (the body fails)."""
        status, j, literal = expect_any(s, i, literals)
        if status == FAILED:
            self.fail(i, problem)
        return (j, literal) if status == DONE else (-1, "")

    def announce(self, name: str, call_id: str | None = None) -> tuple[int, str]:
        """Start a call on the stream and note it, so a failed body can abort it."""
        index, cid = self.stream._new_call(name, call_id)
        self.started.append((index, cid))
        return index, cid

    def next_call(
        self, s: str, i: int, opener: str, closer: str, call_state: int, empty: str
    ) -> tuple[int, bool]:
        """Between calls in a block: ``opener`` starts the next call (in ``call_state``),
        ``closer`` ends the block (a failure with ``empty`` when it held no call)."""
        j, literal = self.expect_one(s, i, (opener, closer), f"expected {opener} or {closer}")
        if j < 0:
            return i, False
        if literal == closer:
            return self.end_block(i, j, empty), False
        self.state = call_state
        return j, True

    def end_block(self, i: int, j: int, empty: str) -> int:
        """The block closed at ``s[i:j]``: done, unless it held no call (fail with ``empty``)."""
        if not self.calls:
            return self.fail(i, empty)
        self.status = DONE
        return j

    def feed_json_call(self, call: JsonCall, s: str, i: int, not_object: str) -> tuple[int, bool]:
        """Feed a call written as one JSON object; ``(where it stopped, whether it ended)``.

        A finished call joins ``calls``; a broken one fails the body (``not_object`` when the
        text is no JSON object at all)."""
        k = call.scanner.feed(s, i)
        call.note_started(self.started)
        return self.json_call_over(call, k, not_object)

    def json_call_over(self, call: JsonCall, k: int, not_object: str) -> tuple[int, bool]:
        """After a piece of ``call`` was fed (to ``k``): its end, or where it broke."""
        if call.scanner.failed:
            return self.fail(k, not_object), False
        if not call.scanner.done:
            return k, False
        result, problem = call.finish()
        call.note_started(self.started)
        if result is None:
            return self.fail(k, problem), False
        if call.raw_controls:
            self.raw_controls.add(call.index)
        self.calls.append((call.index, result))
        return k, True

    def feed_args(self, scanner: ObjectScanner, index: int, s: str, i: int) -> int:
        """Feed a JSON object of arguments, passing its text on to call ``index`` as it comes.
        Check ``status`` and ``scanner.done`` after. Unless strict, raw line breaks and tabs in
        its strings are passed on escaped, and named when the call ends."""
        scanner.raw_controls = not self.stream.strict
        scanner.stops = self.stream.call_stops
        j = scanner.feed(s, i)
        if scanner.failed:
            return self.fail(j, "the arguments are not a JSON object")
        self.stream._args(index, scanner.piece)
        if scanner.raw_count:
            self.raw_controls.add(index)
        return j

    def json_args(self, text: str, i: int) -> dict[str, Any] | None:
        """The arguments object in ``text``; None when it is not one (the body fails)."""
        try:
            args = loads_json(text)
        except (ValueError, RecursionError) as exc:
            self.fail(i, f"the arguments are not valid JSON ({exc})")
            return None
        if not isinstance(args, dict):
            self.fail(i, "the arguments are not a JSON object")
            return None
        return args

    def fail(self, i: int, reason: str) -> int:
        self.status = FAILED
        self.reason = reason
        return i

    def end_of_reply(self) -> None:
        """The reply ended inside this call. Default: the call is incomplete."""
        self.status = FAILED
        self.reason = "the reply ended inside the call"


class MarkerStream(ReplyStream):
    marker: ClassVar[str]
    #: What reads a call after the marker.
    body_class: ClassVar[type[Body]]
    #: The marker to find, set for each subclass from ``marker``.
    _opening: ClassVar[Markers]

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "marker" in cls.__dict__:
            cls._opening = Markers((cls.marker,))
        if "turn_end" in cls.__dict__:
            cls.turn_ends = (cls.turn_end,) if cls.turn_end else ()
        # the characters an end token holds, and white space (which may follow one)
        cls._end_chars = frozenset("".join(cls.turn_ends) + WS)
        if cls.turn_ends:  # a whole token and white space where the text ends; a token's start
            tokens = "|".join(map(re.escape, sorted(cls.turn_ends, key=len, reverse=True)))
            cls._end_at_end = re.compile(rf"(?:{tokens})([ \t\r\n]*)\Z")
            cls._end_start = markers(cls.turn_ends)
            # a token's first character, within reach of the end (white space after it too)
            cls._end_first = re.compile(
                "[" + "".join(sorted({re.escape(t[0]) for t in cls.turn_ends})) + "]"
            )
            cls._end_reach = max(map(len, cls.turn_ends)) + MAX_HELD

    #: The family's end-of-turn tokens, for an engine that leaves one in the reply (SGLang's
    #: tests write GigaChat's ``</s>`` so). At the very end of the reply, after nothing but
    #: whitespace, one is where the turn stopped, not text; anywhere else it stays text. It is
    #: the template's own token, not a stray from the grammar, so it needs no notice.
    turn_ends: ClassVar[tuple[str, ...]] = ()
    #: One such token (a family with one sets this; ``turn_ends`` follows it).
    turn_end: ClassVar[str] = ""
    _end_chars: ClassVar[frozenset[str]] = frozenset()
    _end_at_end: ClassVar[re.Pattern[str]]
    _end_start: ClassVar[Markers]
    _end_first: ClassVar[re.Pattern[str]]
    _end_reach: ClassVar[int]

    _body: Body | None = None
    _raw: list[str]
    #: The marker that opened the body being read.
    opened_by: str = ""
    #: Reply text held back while it may be ``turn_end`` at the reply's end.
    _tail: str = ""
    #: Set by a stream that reads what follows the block just closed its own way (a whole
    #: reply's calls, held): the rest of the piece goes to ``_content`` again.
    _diverted: bool = False

    def new_body(self) -> Body:
        return self.body_class(self)

    def _content(self, text: str) -> None:
        s, self._held = self._held + text, ""  # (the piece held back, not held: _take_held)
        i = 0
        n = len(s)
        while i < n:
            body = self._body
            if body is None:
                j, marker = self._opening.scan(s, i)
                self._text(s[i:j])
                if not marker:
                    self._held = s[j:]
                    return
                self._release_tail()  # a call follows: what was held is text
                self.opened_by = marker  # (a body may look at what opened it)
                self._body = self.new_body()
                self._raw = [marker]
                i = j + len(marker)
                continue
            k = body.feed(s, i)
            self._raw.append(s[i:k])
            if body.status == OPEN:
                if n - k > MAX_HELD:  # a body must not hoard text
                    raise AssertionError("call body held back too much")
                self._held = s[k:]
                return
            self._close(body)
            i = k
            if self._diverted:  # the stream reads what follows the block its own way
                self._diverted = False
                self._content(s[i:])
                return

    def _close(self, body: Body) -> None:
        """The body is over: its calls end, or its text goes back to the reply."""
        if body.status != DONE:
            self._give_back(body)
            return
        for index, call in body.calls:
            if index in body.raw_controls:
                raw_controls_notice(self, call.name)
            self._end(index, call)
        self._body = None
        self._raw = []

    def _give_back(self, body: Body) -> None:
        for index, cid in body.started:
            self._abort(index, cid, body.reason)
        self._notice(
            "call-not-read",
            f"text opening with {self.opened_by or self.marker} is not a call ({body.reason});"
            " it stays reply text",
        )
        self._text("".join(self._raw))
        self._body = None
        self._raw = []

    def _content_end(self) -> None:
        self._end_body()
        self._end_tail()

    def _end_body(self) -> None:
        """The reply is over: the body being read ends with it, or the text held goes out."""
        body = self._body
        if body is not None:
            self._raw.append(self._take_held())
            body.end_of_reply()
            self._close(body)
        else:
            self._text(self._take_held())

    def _end_tail(self) -> None:
        """The reply is over: the text held while it may be an end token goes out, unless
        it is one."""
        tail, self._tail = self._tail, ""
        if not any(tail.startswith(e) and not tail[len(e) :].strip(WS) for e in self.turn_ends):
            super()._text(tail)  # not the turn's end token: it is text

    def _text(self, text: str) -> None:
        ends = self.turn_ends
        if not ends:
            super()._text(text)
            return
        s = self._tail + text
        if s and (
            s[-1] not in self._end_chars  # (fast: no end token can end or begin here)
            or not self._end_first.search(s, max(0, len(s) - self._end_reach))
        ):
            self._tail = ""
            super()._text(s)
            return
        whole = self._end_at_end.search(s)
        if whole is not None and len(whole.group(1)) <= MAX_HELD:
            keep = whole.start()  # the token and the whitespace after it
        else:  # a piece at the end that may still become a token
            keep = len(s) - self._end_start.held(s)
        self._tail = s[keep:]
        super()._text(s[:keep])

    def _release_tail(self) -> None:
        tail, self._tail = self._tail, ""
        super()._text(tail)
