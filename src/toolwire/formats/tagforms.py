"""Two shapes a model writes for a tagged call besides its template's, read by the engine for
every ``tags`` syntax: a call closed in its own tag, and its arguments as one JSON object.

- ``<invoke name="x"/>``: where the name is an attribute, the tag closed in itself is a call
  with no arguments, and the words that end a call, which such a tag stands for, are not
  written (``recovered-self-closing``). DeepSeek V4 writes it; SGLang reads it.
- ``<invoke name="x">{"a": 1}</invoke>``: where the first argument's tag was due, a JSON
  object of the arguments, then the call's end (``recovered-json-arguments``): a model's
  own JSON habit in a tagged framing, as SGLang reads it for DSML. Tags and a JSON body never
  mix in one call.

Both are repairs: named once the block is read, refused by strict reading. Here too, what a
block's opening words may come as: a call with the block's opening left out, its word
beginning with the marker (DSML's ``<｜DSML｜invoke`` after ``<｜DSML｜``), read however the
reply was cut; and, where a declaration says so (``damaged_opening``), the opening's word
after the marker damaged, read past to the line's end when the marker comes again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..events import NoticeCode
from .elements import Elements
from .jsonscan import ObjectScanner
from .markerstream import DONE, FAILED, OPEN, WS, Body, expect_any, expect_literal
from .scan import markers
from .tagsteps import _KEY, _NEXT, Name
from .textargs import TextArgs

if TYPE_CHECKING:
    from .derived import DerivedShape

__all__ = ["DAMAGED", "ELEMENTS", "OBJECT", "TagForms"]

#: The state of a JSON object of the arguments being read (15–18: the other modules').
OBJECT = 19
#: The state of a damaged opening tag being read past.
DAMAGED = 20
#: The state of a value written as nested elements (:mod:`.elements`).
ELEMENTS = 21
#: A damaged tag runs to the end of its line, at most this long.
MAX_DAMAGED = 200


class TagForms(Body):
    """The two shapes (see the module's doc), and a block's opening tag damaged after its
    marker (DerivedShape.damaged_opening): a mixin of the engine's body."""

    shape: DerivedShape
    call: TextArgs | None
    told: list[tuple[NoticeCode, str]]
    scanner: ObjectScanner | None
    bare: bool
    todo: list[str]
    #: The call's arguments came as one JSON object: only its end may follow.
    args_whole: bool
    #: The damaged tag's text while it is read (None: no damaged tag met in this block).
    damage: list[str] | None
    damage_size: int
    elements: Elements | None

    keys: Name
    key_stops: str

    if TYPE_CHECKING:

        def words(self, words: tuple[str, ...], then: int) -> None: ...

        def end_call(self) -> None: ...

        def _escaped(self, s: str, i: int) -> int: ...

    def self_closed(self, s: str, i: int, word: str, then: int) -> tuple[int, bool] | None:
        """At a name's closing ``">`` (``word``): the tag closed in itself instead, which
        ends the call (then the rest of the words that end a call, and state ``then``).
        None when this is not that."""
        if not (word[:1] == '"' and word[-1:] == ">" and self.call is not None):
            return None
        status, j = expect_literal(s, i, word[:-1] + "/>")
        if status == FAILED:
            return None
        if status == OPEN:
            return i, False
        if self.stream.strict:
            return self.fail(i, "a call closed in its own tag"), False
        name = self.call.name
        self.told.append(
            ("recovered-self-closing", f"read {name!r} closed in its own tag, with no arguments")
        )
        self.end_call()
        self.words(self.shape.post[1:], then)
        return j, True

    def between(self, s: str, i: int) -> tuple[int, bool]:
        """After the name or a value: the next key, or the end of the call."""
        if s[i] in WS:
            return i + 1, True
        j = self._escaped(s, i)
        if j != i:
            return max(j, i), j > i
        shape = self.shape
        if self.json_opens(s, i):
            self.scanner = None  # (a new object: see json_body)
            self.state = OBJECT
            return i, True
        opener = "" if self.args_whole else shape.key_open[0]  # (only the call's end now)
        # the call's end first: a key's opening word may begin it (MiniMax M3's NS<)
        status, j, word = expect_any(s, i, shape.post[:1])
        if status == FAILED and opener:
            status, j, word = expect_any(s, i, (opener,))
        if status == OPEN:
            return i, False
        if status == DONE and word == opener:
            self.keys = Name(self.key_stops, "argument name")
            self.words(shape.key_open[1:], _KEY)
            return j, True
        if status == FAILED and len(shape.post) > 1 and not self.stream.strict:
            # the call's own closing word left out, the block's written (Qwen XML's
            # </function> before </tool_call>): the call ends here, named
            status, j, word = expect_any(s, i, shape.post[1:2])
            if status == OPEN:
                return i, False
            if status == DONE:
                assert self.call is not None
                what = f"read a call to {self.call.name[:100]} written without {shape.post[0]}"
                self.told.append(("recovered-closer-missing", what))
                self.end_call()
                self.words(shape.post[2:], _NEXT)
                return j, True
        if status == FAILED and shape.post:
            return self.fail(i, f"expected {opener} or {shape.post[0]}"), False
        self.end_call()  # the call's own closing words came (or it has none)
        if status == DONE:
            self.words(shape.post[1:], _NEXT)
            return j, True
        self.words(shape.post, _NEXT)
        return i, True

    def nested_value(self, s: str, i: int, then: int) -> tuple[int, bool]:
        """A value that may be nested elements (DerivedShape.nested), up to its own closing
        tag; then state ``then``."""
        assert self.elements is not None
        j = self.elements.feed(s, i)
        if self.elements.problem:
            return self.fail(j, self.elements.problem), False
        if not self.elements.done:
            return j, False
        self.elements = None
        self.state = then
        return j, True

    def json_body(self, s: str, i: int, then: int) -> tuple[int, bool]:
        """The call's arguments as one JSON object, passed on as it streams; then the
        call's end is due (state ``then``)."""
        assert self.call is not None
        if self.scanner is None:
            self.scanner = ObjectScanner()
        scanner = self.scanner
        j = self.feed_args(scanner, self.call.index, s, i)
        if self.status != OPEN or not scanner.done:
            return j, False
        args = self.json_args(scanner.text(), j)
        if args is None:
            return j, False
        self.call.whole(args, scanner.text())
        self.scanner = None
        self.args_whole = True
        name = self.call.name
        self.told.append(
            ("recovered-json-arguments", f"read the arguments of {name}, one JSON object")
        )
        self.state = then
        return j, True

    def json_opens(self, s: str, i: int) -> bool:
        """A JSON object of the arguments opens at ``s[i]``, where the first tag was due, in
        a call opened by the family's own opening (one whose opening words were left out is
        a guess already: Functionary's ``<function=NAME>{…}`` is no Qwen XML call)."""
        call = self.call
        return (
            s[i] == "{"
            and not self.bare
            and call is not None
            and not call.args
            and not call.closed
            and not self.stream.strict
        )

    # -- the opening's words: a call with its block left out, a damaged tag

    def bare_after_marker(self, s: str, i: int, then: int) -> tuple[int, bool] | None:
        """Right after the marker, the rest of the word a call opens at with the block's
        opening left out, when that word begins with the marker (DSML's ``<｜DSML｜invoke``
        after ``<｜DSML｜``): the call is read so however the reply was cut (the marker may
        come whole in a piece before the rest of the word). None when this is not that."""
        shape = self.shape
        word = shape.opening[shape.left_out] if shape.left_out else ""
        if (
            len(word) <= len(shape.marker)
            or not word.startswith(shape.marker)
            or self.stream.strict
            or self.bare
            or self.todo != list(shape.opening[1:])
        ):
            return None
        status, j = expect_literal(s, i, word[len(shape.marker) :])
        if status == FAILED:
            return None
        if status == OPEN:
            return i, False
        self.bare = True
        self.words(shape.opening[shape.left_out + 1 :], then)
        return j, True

    def damaged(self, s: str, i: int, then: int) -> tuple[int, bool] | None:
        """Where the opening's word after the marker fails: unless strict, the rest of the
        line is read past (one damaged tag a block). None when this is not that."""
        shape = self.shape
        if (
            not shape.damaged_opening
            or self.stream.strict
            or self.damage is not None
            or self.todo != list(shape.opening[1:])
        ):
            return None
        self.damage, self.damage_size = [], 0
        self.state = DAMAGED
        return self.damaged_step(s, i, then)

    def damaged_step(self, s: str, i: int, then: int) -> tuple[int, bool]:
        """The damaged tag's text, to its line's end or the next marker (bounded), then the
        marker again: the block's opening word, or a call's with the block's left out."""
        assert self.damage is not None
        shape = self.shape
        marker = shape.marker
        if self.damage and self.damage[-1] == "\n":  # the tag is read: what comes after it
            if s[i] in WS:
                return i + 1, True
            bare = shape.opening[shape.left_out] if shape.left_out else marker
            status, j = expect_literal(s, i, bare)  # (the longer word first: it may be this)
            word = bare
            if status == FAILED:
                status, j, word = expect_any(s, i, (marker,))
            if status == OPEN:
                return i, False
            if status == FAILED:
                return self.fail(i, f"no {marker} after a damaged tag"), False
            tag = marker + "".join(self.damage[:-1]).rstrip()
            self.told.append(("recovered-misspelt-tag", f"read past the damaged tag {tag!r}"))
            if word == bare and bare != marker:  # a call with its block's opening left out
                self.bare = True
                self.words(shape.opening[shape.left_out + 1 :], then)
            else:
                self.words(shape.opening[1:], then)
            return j, True
        line, mark = s.find("\n", i), s.find(marker, i)
        stops = [k for k in (line, mark) if k >= 0]
        stop = min(stops) if stops else len(s)
        if not stops:  # hold back what may begin the marker: the next piece decides
            stop -= markers((marker,)).held(s, i, stop)
        self.damage.append(s[i:stop])
        self.damage_size += stop - i
        if self.damage_size > MAX_DAMAGED:
            return self.fail(i, f"no block after {marker}"), False
        if not stops:
            return stop, False
        self.damage.append("\n")  # (the line is over: the marker must come)
        return (stop + 1 if stop == line else stop), True
