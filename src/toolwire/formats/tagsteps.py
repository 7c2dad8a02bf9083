"""The steps of a tagged call's arguments (``tags`` shapes, :mod:`.derived`), and of the
words' slots (a number that counts the calls, a call's id), for the engine's reader
(:mod:`.shapereader`): a key, its value, and what the engine reads there for every
tagged syntax besides the shape's own words, each named and refused by strict reading — a
value written as JSON (held to its end and read, :func:`~.textargs.read_held`), a key with no
value (left out), ``\\n`` written as two characters between the words, other attributes in a
tag that holds a name (:mod:`.attributes`) — and a value wrapped in ``<![CDATA[…]]>`` where
the family writes values so (its inside is the value, whatever it holds).
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from ..events import NoticeCode
from .attributes import Attributes
from .base import loads_json
from .markerstream import FAILED, OPEN, WS, Body, MarkerStream, expect_any, expect_literal
from .scan import Markers
from .textargs import NameReader, TextArgs, read_held

if TYPE_CHECKING:
    from .derived import DerivedShape

__all__ = ["CALL_ID", "NUMBER", "DriftedEnd", "Name", "TagSteps", "shape_stops"]

_LITS, _CALL, _JSON, _NAME, _ARGS, _BETWEEN, _KEY = range(7)
_VALUE_WS, _VALUE_FIRST, _VALUE, _HELD, _NEXT, _END, _SKIP, _CDATA = range(7, 15)
#: (15–17: codesteps.py's) A broken call's rest, skipped to its end or the next call's words.
_RESYNC = 18

#: The word standing for a number that counts the calls (Kimi's ``functions.NAME:0``).
NUMBER = "\x00#"
#: The word standing for a call's id written in the framing (a template that writes the whole
#: call object, ``{"id": "call_1", "type": "function", "function": {...}}``): the model's
#: id, kept as the call's.
CALL_ID = "\x00id"

CDATA_OPEN = "<![CDATA["
#: What an id written in the framing may hold, and its longest (the CALL_ID word).
_ID_CHARS = re.compile(r"[A-Za-z0-9_.:-]*")
_MAX_ID = 64
#: The longest number that counts the calls (the NUMBER word).
_MAX_DIGITS = 32
_CDATA_END = Markers(("]]>",))
#: A separator after a name that is a tag of its own (``<tool_sep>``), not a bracket's end.
#: The longest type name a value's type tag holds.
_MAX_TYPE = 64
#: A separator of its own: a tag, or a word in capitals in brackets (``[ARGS]``).
_SEPARATOR = re.compile(r"<[^<>\s]{2,}>|\[[A-Z_]{2,}\]")


#: A value's closing tag: a drifted one is read for it (see DriftedEnd).
_CLOSER = re.compile(r"</[^\s<>]+>")


class DriftedEnd(Markers):
    """Where a tagged value ends, unless strict: its closing words, or a closing tag drifted
    from them (``</parameter1>``, ``</parameter_function>``, a ``</parameter`` without its
    ``>``) right before the next key or the call's end, what SGLang strips for Qwen3-Coder.
    A tag is drifted only where the next tag follows it, so a value that merely holds such
    text is still read to its true end. The body names each drifted tag it meets
    (``recovered-misspelt-tag``). One search finds either (the closers' own patterns with the
    drifted tag's), so a value is scanned once, as for the closers alone."""

    #: How far back the start of a drifted tag cut short is looked for.
    _REACH = 80

    def __init__(self, ends: tuple[str, ...], closer: str, tail: str, follow: tuple[str, ...]):
        super().__init__(ends)
        lead = r"\r?\n" if tail == "\n" else re.escape(tail)
        drifted = lead + re.escape(closer[:-1]) + r"(?!>)[^\s<>]{0,32}>?[ \t]*"
        nexts = "|".join(map(re.escape, follow))
        starts = "|".join(re.escape(t[:k]) for t in follow for k in range(len(t), 0, -1))
        plain = "|".join(re.escape(m) for m in sorted(self.markers, key=len, reverse=True))
        # at one place a closer comes first: a drifted tag is taken only before a closer
        self._search = re.compile(f"{plain}|{drifted}(?=\\s{{0,8}}(?:{nexts}))").search
        held = self._end.__self__.pattern  # type: ignore[attr-defined]  # the closers' starts
        self._end = re.compile(f"{held}|{drifted}(?:\\s{{0,8}}(?:{starts})?)?\\Z").search
        self._longest_start = max(self._longest_start, self._REACH)
        self._start_ends = None  # (a drifted tag may end with any character)

    @classmethod
    def of(cls, shape: DerivedShape, ends: tuple[str, ...]) -> DriftedEnd | None:
        follow = tuple(w[0] for w in (shape.key_open, shape.post) if w)
        closer = shape.value_end[0] if shape.value_end else ""
        if not (_CLOSER.fullmatch(closer) and follow):
            return None
        return cls(ends, closer, shape.value_tail, follow)


class Name(NameReader):
    """A name that fails at the very character that breaks it, however the text is cut.

    A learned marker may be made of characters a name can hold (``@@``), so where a broken
    name gives its text back decides whether a marker inside it is seen again: that place
    must not depend on where a chunk began.
    """

    def read(self, body: Body, s: str, i: int) -> tuple[str | None, int]:
        _stop, bad = self._look(s, i)
        if bad >= 0:
            body.fail(bad, f"a malformed {self._what}")
            return None, bad
        return super().read(body, s, i)


class TagSteps(Body):
    """The tagged-argument steps of the engine's body (a mixin of its reader's body)."""

    shape: DerivedShape
    stream: MarkerStream
    call: TextArgs | None
    told: list[tuple[NoticeCode, str]]
    todo: list[str]
    key: str
    keys: Name
    key_stops: str
    value_key: str
    held: list[str]
    value_ends: Markers | None
    attributes: Attributes | None
    escaped_newline: bool
    digits: int
    model_id: str
    number: str
    opened_by: str
    call_name: str
    value_type: str
    type_name: str | None
    then: int

    if TYPE_CHECKING:  # the body's own, which this mixin's steps call

        def words(self, words: tuple[str, ...], then: int) -> None: ...

        def _then(self, i: int) -> tuple[int, bool]: ...

        def end_call(self) -> None: ...

        def fail(self, i: int, problem: str) -> int: ...

        def named(self, name: str, is_tool: bool, i: int, said: str = "") -> bool: ...

    def _key(self, s: str, i: int) -> tuple[int, bool]:
        key, i = self.keys.read(self, s, i)
        if key is None:
            return i, False
        assert self.call is not None
        if key in self.call.args:
            # which of the two values the model meant is not known: no call (as SGLang's
            # MiniCPM tests assert), never a value chosen in silence
            return self.fail(i, f"the argument {key!r} is given twice"), False
        self.key = key
        self.words(self.shape.key_mid, _VALUE_WS)
        return i, True

    def _held(self, s: str, i: int) -> tuple[int, bool]:
        """A value that may be JSON to read (:func:`~.textargs.read_held`): kept until its
        end, then passed on as read."""
        assert self.value_ends is not None and self.call is not None
        j, end = self.value_ends.scan(s, i)
        self.held.append(s[i:j])
        if not end:
            return j, False
        if not end.endswith(self.shape.value_end[0]):
            self.drifted(s, j + len(end))
        text = "".join(self.held)
        self.held = []
        if self.value_type == "json":  # its tag says JSON: the grammar's own, read strictly
            self.value_type = ""
            try:
                self.call.json_value(loads_json(text), text)
            except (ValueError, RecursionError) as exc:
                return self.fail(j, f"a value its tag says is JSON is not JSON ({exc})"), False
            self.words(self.shape.value_end[1:], _BETWEEN)
            return j + len(end), True
        value, repair = read_held(text)
        if repair:
            what = f"the argument {self.value_key!r} of {self.call.name}: {repair}"
            self.told.append(("arguments-repaired", what))
        self.call.value(value)
        self.call.close()
        self.words(self.shape.value_end[1:], _BETWEEN)
        return j + len(end), True

    def drifted(self, s: str, i: int) -> None:
        """A value ended at a drifted closing tag just before ``s[i]`` (:class:`DriftedEnd`):
        named once the block is read."""
        assert self.call is not None
        tag = s[s.rfind("</", max(0, i - 64), i) : i].strip()
        closer = self.shape.value_end[0]
        self.told.append(("recovered-misspelt-tag", f"read {tag} as the {closer} it stands for"))

    def _attributes(self, s: str, i: int) -> tuple[int, bool] | None:
        """Other attributes after a name written as an attribute (:mod:`.attributes`): read
        past up to the tag's end, unless strict, and named. None when none follow."""
        if self.attributes is None:
            if i + 1 == len(s):
                return i, False  # wait: the tag's end, or another attribute?
            if s[i + 1] not in WS:
                return None
            if self.stream.strict and not (self.shape.type_attr and self.then == _VALUE_WS):
                return self.fail(i, "attributes in a tag besides its name"), False
            self.attributes = Attributes()
            i += 1
        j, problem = self.attributes.feed(s, i)
        if problem is None:
            return j, False
        if problem:
            return self.fail(j, problem), False
        if not self._typed(self.attributes.text()):
            if self.stream.strict:
                return self.fail(i, "attributes in a tag besides its name"), False
            what = f"read past {self.attributes.text()}"
            self.told.append(("recovered-attributes-ignored", what))
        self.attributes = None
        self.todo.pop(0)
        return self._then(j) if not self.todo else (j, True)

    def _typed(self, attributes: str) -> bool:
        """A value's type written in its tag (DerivedShape.type_attr, ``string="true"``):
        the grammar's own, so no repair, strict or not. True when it is the value's only
        other attribute (the value is then its text exactly, or, ``"false"``, JSON)."""
        attr = self.shape.type_attr
        if not attr or self.then != _VALUE_WS:
            return False
        for kind, value_type in (("true", "text"), ("false", "json")):
            if attributes == f'{attr}="{kind}"':
                self.value_type = value_type
                return True
        return False

    def type_tag(self, s: str, i: int) -> tuple[int, bool] | None:
        """A value's type in a tag of its own before its last opening word
        (DerivedShape.type_tag): its name read up to the tag's closer (which the words then
        match), bounded, for the value coming. None when not that."""
        tag = self.shape.type_tag
        if self.type_name is None:
            status, j = expect_literal(s, i, tag[0])
            if status == FAILED:
                return None
            if status == OPEN:
                return i, False
            self.type_name = ""
            return j, True
        stop = s.find("<", i, i + _MAX_TYPE + 1)
        end = len(s) if stop < 0 else stop
        self.type_name += s[i:end]
        if len(self.type_name) > _MAX_TYPE:
            return self.fail(i, "a value's type that is too long"), False
        if stop < 0:
            return end, False
        self.value_type = "text" if self.type_name.strip() == "string" else "json"
        self.type_name = None
        self.todo.insert(0, tag[1])  # its closer, then the words before the value
        return stop, True

    def _left_out(self, s: str, i: int, word: str) -> int:
        """Unless strict, a key whose value never opened (the next key, or the call's end,
        where the rest of the words before a value were due) is left out, so that a required
        argument is reported missing, not filled with nothing. Where the body goes on; ``i``
        when this is not that; -1 to wait."""
        shape = self.shape
        if self.stream.strict or expect_literal(s, i, word)[0] != FAILED:
            return i
        ends = tuple(w[0] for w in (shape.key_open, shape.post) if w)
        status, j, literal = expect_any(s, i, ends)
        if status == OPEN:
            return -1
        if status == FAILED:
            return i
        assert self.call is not None
        what = f"the argument {self.key!r} of {self.call.name} has no {word}: left out"
        self.told.append(("arguments-repaired", what))
        self.key = ""
        if shape.key_open and literal == shape.key_open[0]:
            self.keys = Name(self.key_stops, "argument name")
            self.words(shape.key_open[1:], _KEY)
        else:
            self.end_call()
            self.words(shape.post[1:], _NEXT)
        return j

    def no_separator(self, s: str, i: int, word: str) -> bool | None:
        """Unless strict, a separator token due after a call's name left out (Hunyuan's
        ``<tool_sep>``, Mistral's ``[ARGS]``), where what comes after it follows straight
        (the first key or the call's end; the arguments' ``{``), as SGLang reads HY4 and vLLM
        Mistral v11, is read, named (``recovered-separator-missing``). Only a separator that
        is a token of its own: a name's closing ``>`` is no separator. True when read (the
        body goes on at ``i``), False to wait, None when this is not that."""
        shape = self.shape
        if self.stream.strict or word != shape.name_end[0] or not _SEPARATOR.fullmatch(word):
            return None
        if shape.kind == "tags":
            follows = tuple(w[0] for w in (shape.key_open, shape.post) if w)
            name, then = self.call.name if self.call is not None else "", _BETWEEN
        else:
            follows = ("{",) if shape.kind in ("name-json", "name-literal") else ("(",)
            name, then = self.call_name, _ARGS
        status, _j, _word = expect_any(s, i, follows)
        if status == FAILED:
            return None
        if status == OPEN:
            return False
        what = f"read a call to {name[:100]} written without {word} after its name"
        self.told.append(("recovered-separator-missing", what))
        self.words((), then)  # what follows, read from here
        return True

    def _escaped(self, s: str, i: int) -> int:
        """Unless strict, ``\\n`` written as two characters between the words (what a model
        copies from a template shown as JSON) is the newline it stands for, named once a
        call (``recovered-escaped-newline``). Where the body goes on; ``i`` when this is not
        that; -1 to wait. Never inside a value or a name."""
        if s[i] != "\\" or self.stream.strict:
            return i
        if i + 1 == len(s):
            return -1  # wait: is it \\n?
        if s[i + 1] != "n":
            return i
        if not self.escaped_newline:
            self.escaped_newline = True
            what = "read a call whose words were parted by \\n written as two characters"
            self.told.append(("recovered-escaped-newline", what))
        return i + 2

    def _cdata_start(self, s: str, i: int) -> int:
        """Where the family wraps values in ``<![CDATA[…]]>``: past the opener when the value
        starts with it (then state ``_CDATA``); ``i`` when it does not; -1 to wait."""
        status, j = expect_literal(s, i, CDATA_OPEN)
        if status == OPEN:
            return -1
        return j if status != FAILED else i

    def _cdata(self, s: str, i: int) -> tuple[int, bool]:
        """The inside of a CDATA section, up to its ``]]>``: the value, whatever it holds;
        then the value's closing words."""
        assert self.call is not None
        j, end = _CDATA_END.scan(s, i)
        self.call.value(s[i:j])
        if not end:
            return j, False
        self.call.close()
        self.words(self.shape.value_end, _BETWEEN)
        return j + len(end), True

    def _number(self, s: str, i: int) -> tuple[int, bool]:
        """Digits, at least one, as many as come (bounded like a name)."""
        j = i
        room = _MAX_DIGITS + 1 - self.digits
        while j < len(s) and j - i < room and s[j].isdigit():
            j += 1
        self.digits += j - i
        self.number += s[i:j]
        if self.digits > _MAX_DIGITS:  # fail where the limit is passed, however cut
            return self.fail(j - 1, "a number too long"), False
        if j == len(s):
            return j, False
        if not self.digits:
            return self.fail(j, "expected a number"), False
        self.digits = 0
        if self.shape.id_words:  # the words so far are the call's id
            read = self.shape.name_end[: len(self.shape.name_end) - len(self.todo)]
            head = self.opened_by + self.call_name + "".join(read) if self.call_name else ""
            self.model_id = head + self.number
        self.number = ""
        self.todo.pop(0)
        return self._then(j) if not self.todo else (j, True)

    def _call_id(self, s: str, i: int) -> tuple[int, bool]:
        """A call's id written in the framing: id characters, bounded; kept as the id the
        call is announced with (none written: a fresh one)."""
        m = _ID_CHARS.match(s, i, min(len(s), i + _MAX_ID + 1 - len(self.model_id)))
        j = m.end() if m else i
        self.model_id += s[i:j]
        if len(self.model_id) > _MAX_ID:
            return self.fail(j, "a call id too long"), False
        if j == len(s):
            return j, False
        # none written: the call is given a fresh id, as for a syntax with no id
        self.todo.pop(0)
        return self._then(j) if not self.todo else (j, True)


@functools.lru_cache(maxsize=256)  # bounded: learned shapes come and go
def shape_stops(shape: DerivedShape) -> tuple[str, str, Markers | None, Markers | None]:
    """What ends a name, a key and a value in ``shape`` (a value: strict, and not)."""
    followers = (shape.name_end, shape.key_open, shape.post, shape.next_call, shape.trail)
    # a backslash ends a name (no tool name holds one): \\n may follow it (see _escaped)
    stops = WS + "\\" + "".join(w[0][0] for w in followers if w)
    if shape.kind == "name-python":
        stops += "("
    if shape.kind in ("name-json", "name-literal"):
        stops += "{"  # (with words due after the name: they may be left out, see _left_out)
    key_stops = WS + (shape.key_mid[0][0] if shape.key_mid else "")
    ends = shape.value_end[0] if shape.value_end else ""
    # (one marker where the template writes no white space before the end: half the scan)
    # a line break written \r\n (Windows line endings) is the template's \n
    tails = (shape.value_tail, "\r\n") if shape.value_tail == "\n" else (shape.value_tail,)
    found = (*(tail + ends for tail in tails), ends)
    value_ends = Markers(tuple(dict.fromkeys(found))) if ends else None
    drifted = DriftedEnd.of(shape, value_ends.markers) if value_ends else None
    return stops, key_stops, value_ends, drifted or value_ends
