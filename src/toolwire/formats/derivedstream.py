"""The reply stream of a declared or learned syntax: where each block of calls opens (a
form's marker, the word a call opens at with the words before it left out, or a JSON object
right after a closed call), which form a block is read in, and what a block read or given
back leaves in the reply (its repairs named, items left out given back, quietly when it was
never call markup). Each block is read by :class:`~.shapereader.DerivedBody`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from .blockends import UNOPENED
from .echoes import Echo, ToolOutput, echo_words
from .markerstream import DONE, WS, Body, MarkerStream
from .scan import Markers, markers, special_words
from .shapereader import DerivedBody

if TYPE_CHECKING:
    from .derived import DerivedShape

__all__ = ["DerivedStream", "TurnOpener"]


class DerivedStream(MarkerStream):
    """The reply stream of one :class:`DerivedShape`, or of a family's several forms, each a
    shape of its own (a subclass sets them): the word that opens a block chooses its shape."""

    shape: ClassVar[DerivedShape]
    #: The family's other forms (GigaChat 3's call message and 3.1's call token).
    forms: ClassVar[tuple[DerivedShape, ...]] = ()
    body_class = DerivedBody
    #: Each form by the words that open it (its marker; a call opened with words left out).
    _by_word: ClassVar[dict[str, DerivedShape]]
    #: The forms that share a marker, by it (the words after it choose one).
    _sharing: ClassVar[dict[str, tuple[DerivedShape, ...]]]
    #: What a call opens at, strict and not; and right after a closed call, the marker or
    #: an unopened call.
    _strict: ClassVar[Markers | None]
    _lenient: ClassVar[Markers | None]
    _after_call: ClassVar[Markers | None]
    #: The forms whose block is the whole reply, by their first word (read by the
    #: :class:`~.wholereply.WholeReply` layer, which a syntax with one has).
    _whole: ClassVar[dict[str, DerivedShape]] = {}
    #: The whole form a body is being opened in (see WholeReply).
    whole_form: DerivedShape | None = None
    #: The template's generation prompt ends with the marker (Functionary v3.2's ``>>>``):
    #: a reply starts as if it had just been read (see Syntax.primed).
    primed: ClassVar[bool] = False
    #: A tool's output the model writes itself, (opener, closer) as its template frames a
    #: tool's result (Syntax.tool_outputs; :mod:`.echoes`).
    tool_outputs: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: The closers a model may write again right after a block, computed from the forms,
    #: and the tool outputs' closers by their opener (:mod:`.echoes`).
    _echoes: ClassVar[frozenset[str]] = frozenset()
    _outputs: ClassVar[dict[str, str]] = {}
    #: What a call opens at right after a block (unless strict): a closer again too.
    _after_block: ClassVar[Markers | None] = None
    #: Only white space came since the last block of calls closed.
    after_block = False
    #: A closer written again was named (once a reply).
    _told_echo = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "shape" not in cls.__dict__ and "forms" not in cls.__dict__:
            return
        every = (cls.shape, *cls.forms)
        # a whole reply's form opens only where the reply starts (:mod:`.wholereply`)
        cls._whole = {s.marker: s for s in every if s.whole}
        shapes = tuple(s for s in every if not s.whole)
        opened = [s.marker for s in shapes]
        bare = [s.opening[s.left_out] for s in shapes if s.left_out]
        cls._by_word = {}
        for word, shape in [
            *zip(opened, shapes, strict=True),
            *((s.opening[s.left_out], s) for s in shapes),
        ]:
            cls._by_word.setdefault(word, shape)
        cls._sharing = {
            m: tuple(s for s in shapes if s.marker == m) for m in opened if opened.count(m) > 1
        }
        # (a closer that a block's opening words begin with, or that begins them, is theirs)
        words = (*opened, *bare)
        # (nor the turn's end tokens: where the reply ends, they are its end, not an echo)
        ends = (*cls.turn_ends,)
        echoes = tuple(
            w
            for w in echo_words(shapes)
            if not any(m.startswith(w) or w.startswith(m) for m in words) and w not in ends
        )
        cls._echoes = frozenset(echoes)
        cls._outputs = dict(cls.tool_outputs)
        outputs = tuple(cls._outputs)
        cls._strict = markers(tuple(opened)) if opened else None
        cls._lenient = markers((*opened, *bare, *outputs)) if opened else None
        cls._after_call = markers((*opened, *outputs, *echoes, UNOPENED)) if opened else None
        cls._after_block = markers((*opened, *bare, *outputs, *echoes)) if opened else None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The form of the block being read, or of the last one (an unopened call's).
        self.last = self.shape
        self._first_opening()
        #: A body is being opened where the reply starts (see ``primed``).
        self.primed_now = self.primed
        if self.primed:
            self.opened_by = self.shape.marker
            self._body = self.new_body()
            self._raw = []
            self.primed_now = False

    @property
    def call_stops(self) -> tuple[str, ...]:
        """Every form's marker (see ReplyStream.call_stops)."""
        return self._strict.markers if self._strict is not None else ()

    @property
    def thinking_stops(self) -> tuple[str, ...]:
        """Every form's marker, and the special token a call opens at with the words before
        it left out (Kimi K2's ``<|tool_call_begin|>`` with no section around it)."""
        bare = tuple(s.opening[s.left_out] for s in (self.shape, *self.forms) if s.left_out)
        return (*self.call_stops, *(w for w in special_words(bare) if w in bare))

    def forms_of(self, marker: str) -> tuple[DerivedShape, ...]:
        """Every form opening with ``marker`` (several: the opening's next words choose)."""
        return self._sharing.get(marker, ())

    def shape_for(self, opened: str) -> DerivedShape:
        """The form a block opening with ``opened`` is read in."""
        shape = self.whole_form or self._by_word.get(opened, self.last)
        self.last = shape
        return shape

    def _first_opening(self) -> None:
        """What a call opens at: each form's marker, and unless strict the word a call may
        open at with the words before it left out (DerivedShape.left_out)."""
        self._opening = self._strict if self.strict else self._lenient  # type: ignore[misc,assignment]

    def new_body(self) -> Body:
        self._first_opening()  # (after a call, _close may widen it for the next scan)
        opened = self.opened_by
        if opened in self._echoes:
            return Echo(self)
        if opened in self._outputs:
            return ToolOutput(self, self._outputs[opened], self.call_stops)
        return super().new_body()

    def _text(self, text: str) -> None:
        if self.after_block and text.strip(WS):
            self.after_block = False
        super()._text(text)

    def _close(self, body: Body) -> None:
        if isinstance(body, (Echo, ToolOutput)) and body.status == DONE:
            if isinstance(body, Echo):
                if not self._told_echo:  # (once a reply, however often written)
                    self._told_echo = True
                    self._notice(
                        "recovered-echoed-markup",
                        f"dropped {self.opened_by} written again after the calls",
                    )
                self._opening = self._after_block  # type: ignore[misc,assignment]
            else:
                self._notice(
                    "ignored-tool-response",
                    "the model wrote a tool's output itself; it was not shown or believed",
                )
            self._body = None
            self._raw = []
            return
        if not isinstance(body, DerivedBody) or body.status != DONE:
            super()._close(body)
            return
        if self.hold_whole(body):
            return
        for code, message in body.told:
            self._notice(code, message)
        if body.shape.repair:  # a form only read as a repair (DerivedShape.repair)
            self._notice(
                body.shape.repair,  # type: ignore[arg-type]
                f"read calls written without the family's opening {self.shape.marker}",
            )
        if body.no_tool and not body.calls:
            self._notice("directly-answer", "the model chose to answer in text, not a tool")
        super()._close(body)
        whole = "list" if body.listed or (body.py_listed and body.shape.next_call) else "block"
        for text, problem in body.left:
            self._notice(
                "call-not-read",
                f"an item of the {whole} of calls is not a call ({problem}); it stays text, the "
                f"{whole}'s other calls are read",
            )
            # one a line where nothing is written between two calls (each on its line)
            self._text(text if body.shape.next_call else text + "\n")
        self._text(body.rest)  # what the reply ended on after the calls
        if self.strict:
            return
        self.after_block = not body.left and not body.rest.strip(WS)
        if body.then_unopened:
            self._opening = self._after_call  # type: ignore[misc,assignment]
        else:  # a closer may come again (see .echoes)
            self._opening = self._after_block  # type: ignore[misc,assignment]

    def hold_whole(self, body: DerivedBody) -> bool:
        """A whole reply's block is read: held until the reply ends (see WholeReply)."""
        return False

    def _give_back(self, body: Body) -> None:
        if isinstance(body, (Echo, ToolOutput)) or (
            isinstance(body, DerivedBody)
            and (
                (body.shape.plain_marker and body.marker_only)
                or (body.deferred and not body.started)
                or (body.shape.whole and not (body.started or body.looked))
            )
        ):
            # a closer after text (see .echoes), a plain word the opening's next word did
            # not follow (Command R+'s ``Action:``),
            # or a marker that opens text too no call's name and words (``>>>`` in prose), or
            # no call after the prompt's marker: prose, with no notice
            self._text("".join(self._raw))
            self._body = None
            self._raw = []
            return
        if isinstance(body, DerivedBody) and (body.unopened or (body.bare and not body.certain)):
            # opened where a call's opening words were left out: no call markup by itself,
            # so given back quietly, unless a call was announced (then withdrawn, named)
            for index, cid in body.started:
                self._abort(index, cid, body.reason)
            if body.started:
                # (the word it opened at, however the reply was cut: see bare_after_marker)
                shape = body.shape
                word = shape.opening[shape.left_out] if body.bare else self._raw[0]
                self._notice(
                    "call-abandoned",
                    f"a call opening with {word} was not one ({body.reason}); its "
                    "text follows as text",
                )
            self._text("".join(self._raw))
            self._body = None
            self._raw = []
            return
        super()._give_back(body)


class TurnOpener(MarkerStream):
    """A stream layer for a family whose replies may open with its template's own turn
    opener (Command R+'s ``<|CHATBOT_TOKEN|>``, which a reader of the raw output sees): it is
    dropped there, as llama.cpp drops it. A layer, so no other family pays for the check."""

    turn_opener: ClassVar[str] = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The reply's start while it may still be the turn opener (None once it is not).
        self._start: str | None = ""

    def _content(self, text: str) -> None:
        if self._start is not None:
            s = self._start + text
            if len(s) < len(self.turn_opener) and self.turn_opener.startswith(s):
                self._start = s
                return
            self._start = None
            text = s.removeprefix(self.turn_opener)
        if text:
            super()._content(text)

    def _content_end(self) -> None:
        if self._start:  # only the start of the opener: text
            super()._content(self._start)
        self._start = None
        super()._content_end()
