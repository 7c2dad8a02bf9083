"""A grammar learned from a chat template that no registered family reads.

When no family reads the probe call back, detection renders the conversation once with one
known call and once with two, and learns from the difference where the name and the
arguments go (the way llama.cpp's autoparser diffs renderings). Three payloads are learned:

- ``json``: a JSON object ``{"name": N, "arguments"|"parameters": {...}}`` (alone between an
  opening and a closing text, or as the items of a list after a marker);
- ``name-json``: the name, a separating text, then the arguments as a JSON object
  (``<function=NAME>{...}</function>``);
- ``tags``: the name, then each argument as a key and a text value between learned texts
  (``<parameter=K>V</parameter>``, ``<arg_key>K</arg_key><arg_value>V</arg_value>``).

Around the payload the texts are learned from the two renderings: what opens the calls
(its first word is the marker), what ends each call, what separates two calls and what
closes the block. Learned texts are matched word by word with any whitespace between, so a
model that breaks a line differently is still read. A shape is only claimed when the family
built from it reads both renderings back exactly (:mod:`toolwire.formats.detect` checks), so
nothing here is guessed from the template's source. The reader has the guarantees of every
family: linear, streaming, bounded, and a call that does not parse stays text with a notice.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

from ..messages import ToolCall
from .base import Family
from .callshape import CallShape
from .jsoncall import JsonCall
from .jsonscan import ObjectScanner
from .markerstream import DONE, MAX_HELD, OPEN, WS, MarkerStream, expect_literal
from .reasoning import CLOSERS
from .scan import Markers
from .textargs import NameReader, TextArgs, TextBody

__all__ = ["DerivedShape", "learn_shape"]

Words = tuple[str, ...]

#: The longest learned word: a body may wait for a whole word, and must not hold much.
MAX_WORD = MAX_HELD - 16
#: The most words one learned text may have.
MAX_WORDS = 8
#: The word standing for a number that counts the calls (Kimi's ``functions.NAME:0``).
NUMBER = "\x00#"
#: How far apart the pieces of one call may be in a rendering.
_GAP = 200

_LITS, _CALL, _JSON, _NAME, _ARGS, _BETWEEN, _KEY, _VALUE_WS, _VALUE, _NEXT, _END = range(11)


@dataclass(frozen=True)
class DerivedShape:
    """Where a template writes a call's name and arguments, and the texts around them."""

    #: ``json``, ``name-json`` or ``tags`` (see the module docstring).
    kind: str
    #: The words that open the calls; the first is the marker the reply is scanned for.
    opening: Words
    #: The words that end each call.
    post: Words = ()
    #: The words between one call's end and the next call's payload.
    next_call: Words = ()
    #: The words that close the block of calls (none: the block ends after a call).
    trail: Words = ()
    #: ``json``: the keys of the name and the arguments, and keys with a fixed text.
    name_key: str = "name"
    args_key: str = "arguments"
    constants: tuple[tuple[str, str], ...] = ()
    #: ``json``: keys holding a text that differs from call to call (an id).
    strings: tuple[str, ...] = ()
    #: ``name-json`` and ``tags``: the words after the name.
    name_end: Words = ()
    #: ``tags``: the words before a key, between key and value, and after a value, and the
    #: whitespace the template writes around a value (dropped once, when the model writes it).
    key_open: Words = ()
    key_mid: Words = ()
    value_end: Words = ()
    value_lead: str = ""
    value_tail: str = ""

    @property
    def marker(self) -> str:
        return self.opening[0]

    def describe(self) -> str:
        """The shape written out with placeholders, for labels and ``detect --json``."""
        if self.kind == "json":
            payload = f'{{"{self.name_key}": NAME, "{self.args_key}": {{...}}}}'
        elif self.kind == "name-json":
            payload = "NAME" + " ".join(self.name_end) + "{...}"
        else:
            arg = " ".join(self.key_open) + "KEY" + " ".join(self.key_mid) + "VALUE"
            payload = "NAME" + " ".join(self.name_end) + arg + " ".join(self.value_end) + "..."
        one = " ".join(self.opening) + payload + " ".join(self.post)
        more = " ".join(self.next_call) + "..." + " ".join(self.post) + " ".join(self.trail)
        return f"{one} {more}".strip().replace(NUMBER, "0")

    @cached_property
    def family(self) -> Family:
        """The family reading replies in this shape (built once per shape)."""
        stream = type("DerivedStream", (DerivedStream,), {"marker": self.marker, "shape": self})
        derived: type[Family] = type(
            "Derived",
            (Family,),
            {
                "name": "derived",
                "label": f"derived from the template: {self.describe()}",
                "markers": (self.marker,),
                "stream_class": stream,
                # ids of nine letters and digits suit every template (Mistral's demand them);
                # an unknown template is given the ids every template accepts
                "call_ids": "alnum9",
            },
        )
        return derived()

    def to_json(self) -> dict[str, Any]:
        """The shape as plain data, for ``detect --json``."""
        out: dict[str, Any] = {"kind": self.kind, "describe": self.describe()}
        for key in ("opening", "post", "next_call", "trail", "name_end"):
            out[key] = list(getattr(self, key))
        if self.kind == "json":
            out.update(name_key=self.name_key, args_key=self.args_key)
            out["constants"] = dict(self.constants)
            out["strings"] = list(self.strings)
        if self.kind == "tags":
            for key in ("key_open", "key_mid", "value_end"):
                out[key] = list(getattr(self, key))
        return out


# --------------------------------------------------------------------------- reading


class _DerivedBody(TextBody):
    """One block of calls in a :class:`DerivedShape`, read one step at a time."""

    stream: DerivedStream

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        assert isinstance(stream, DerivedStream)
        self.shape = shape = stream.shape
        self.todo: list[str] = list(shape.opening[1:])
        self.then = _CALL
        self.state = _LITS
        followers = (shape.name_end, shape.key_open, shape.post, shape.next_call, shape.trail)
        stops = WS + "".join(w[0][0] for w in followers if w)
        if shape.kind == "name-json" and not shape.name_end:
            stops += "{"
        self.name_stops = stops
        self.key_stops = WS + (shape.key_mid[0][0] if shape.key_mid else "")
        ends = shape.value_end[0] if shape.value_end else ""
        lead = shape.value_tail
        self.value_ends = Markers((lead + ends, ends)) if ends else None
        self.digits = 0
        self.json_call: JsonCall | None = None
        self.names: NameReader | None = None
        self.keys = NameReader(self.key_stops, "argument name")
        self.scanner: ObjectScanner | None = None
        self.index = -1
        self.id = ""
        self.call_name = ""

    def words(self, words: Words, then: int) -> None:
        """Match ``words`` next, then go on in state ``then``."""
        self.todo = list(words)
        self.then = then
        self.state = _LITS
        if not words:
            self._then(0)

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _LITS:
            if not self.todo:
                return self._then(i)
            if self.todo[0] == NUMBER:
                return self._number(s, i)
            if s[i] in WS:
                return i + 1, True
            j = self.expect(s, i, self.todo[0], f"expected {self.todo[0]}")
            if j < 0:
                return i, False
            self.todo.pop(0)
            return self._then(j) if not self.todo else (j, True)
        if state == _CALL:
            return self._call(s, i)
        if state == _JSON:
            assert self.json_call is not None
            i, ended = self.feed_json_call(self.json_call, s, i, "the call is not a JSON object")
            if ended:
                self.words(self.shape.post, _NEXT)
            return i, ended
        if state == _NAME:
            return self._name(s, i)
        if state == _ARGS:
            return self._args(s, i)
        if state == _BETWEEN:
            return self._between(s, i)
        if state == _KEY:
            return self._key(s, i)
        if state == _VALUE_WS:
            status, j = expect_literal(s, i, self.shape.value_lead)
            if status == OPEN:
                return i, False
            self.state = _VALUE
            return (j if status == DONE else i), True
        if state == _VALUE:
            assert self.value_ends is not None
            i, complete = self.read_value(s, i, self.value_ends, _BETWEEN)
            if complete:
                self.words(self.shape.value_end[1:], _BETWEEN)
            return i, complete
        return self._next(s, i)

    def _number(self, s: str, i: int) -> tuple[int, bool]:
        """Digits, at least one, as many as come (bounded like a name)."""
        j = i
        while j < len(s) and s[j].isdigit():
            j += 1
        self.digits += j - i
        if self.digits > 32:
            return self.fail(i, "a number too long"), False
        if j == len(s):
            return j, False
        if not self.digits:
            return self.fail(j, "expected a number"), False
        self.digits = 0
        self.todo.pop(0)
        return self._then(j) if not self.todo else (j, True)

    def _then(self, i: int) -> tuple[int, bool]:
        """The words are matched: go on to the next state (the block may be over)."""
        self.state = self.then
        if self.then == _END:
            self.status = DONE
            return i, False
        return i, True

    def _call(self, s: str, i: int) -> tuple[int, bool]:
        if s[i] in WS:
            return i + 1, True
        kind = self.shape.kind
        if kind == "json":
            shape = CallShape(
                name_key=self.shape.name_key,
                args_keys=(self.shape.args_key,),
                constants=dict(self.shape.constants),
                strings=frozenset(self.shape.strings),
            )
            self.json_call = JsonCall(self.stream, shape)
            self.state = _JSON
        else:
            self.names = NameReader(self.name_stops, "tool name")
            self.state = _NAME
        return i, True

    def _name(self, s: str, i: int) -> tuple[int, bool]:
        assert self.names is not None
        name, i = self.names.read(self, s, i)
        if name is None:
            return i, False
        if self.shape.kind == "tags":
            self.call = TextArgs.start(self, name)
            self.words(self.shape.name_end, _BETWEEN)
        else:
            self.call_name = name
            self.index, self.id = self.announce(name)
            self.scanner = ObjectScanner()
            self.words(self.shape.name_end, _ARGS)
        return i, True

    def _args(self, s: str, i: int) -> tuple[int, bool]:
        assert self.scanner is not None
        if not self.scanner.text() and s[i] in WS:
            return i + 1, True
        i = self.feed_args(self.scanner, self.index, s, i)
        if self.status != OPEN or not self.scanner.done:
            return i, False
        text = self.scanner.text().strip()
        args = self.json_args(text, i)
        if args is None:
            return i, False
        self.calls.append((self.index, ToolCall(self.id, self.call_name, args, text)))
        self.words(self.shape.post, _NEXT)
        return i, True

    def _between(self, s: str, i: int) -> tuple[int, bool]:
        """After the name or a value: the next key, or the end of the call."""
        if s[i] in WS:
            return i + 1, True
        opener = self.shape.key_open[0]
        status, j = expect_literal(s, i, opener)
        if status == OPEN:
            return i, False
        if status == DONE:
            self.keys = NameReader(self.key_stops, "argument name")
            self.words(self.shape.key_open[1:], _KEY)
            return j, True
        self.end_call()
        self.words(self.shape.post, _NEXT)
        return i, True

    def _key(self, s: str, i: int) -> tuple[int, bool]:
        key, i = self.keys.read(self, s, i)
        if key is None:
            return i, False
        assert self.call is not None
        if not self.call.open(key):
            return self.fail(i, f"the argument {key!r} is given twice"), False
        self.words(self.shape.key_mid, _VALUE_WS)
        return i, True

    def _next(self, s: str, i: int) -> tuple[int, bool]:
        """After a call: the next call, the block's closing words, or (with none) the end."""
        shape = self.shape
        if not shape.trail and shape.next_call == shape.opening:
            self.status = DONE  # every call is its own block: the marker finds the next
            return i, False
        if shape.trail and s[i] in WS:  # the block must close: whitespace is part of it
            return i + 1, True
        k = i
        while k < len(s) and s[k] in WS and k - i <= 8:
            k += 1
        if k - i > 8:  # a paragraph break: the block is over
            self.status = DONE
            return i, False
        if k == len(s):
            return i, False  # wait: what follows the whitespace decides
        for then, words in ((_CALL, shape.next_call), (_END, shape.trail)):
            if not words:
                continue
            status, j = expect_literal(s, k, words[0])
            if status == OPEN:
                return i, False
            if status == DONE:
                self.words(words[1:], then)
                return j, self.status == OPEN
        if shape.trail:
            return self.fail(k, f"expected {shape.trail[0]} after the call"), False
        self.status = DONE
        return i, False

    def end_of_reply(self) -> None:
        if self.state == _NEXT and not self.shape.trail and self.calls:
            self.status = DONE
            return
        super().end_of_reply()


class DerivedStream(MarkerStream):
    """The reply stream of one :class:`DerivedShape` (a subclass per shape sets both)."""

    shape: ClassVar[DerivedShape]
    body_class = _DerivedBody


# --------------------------------------------------------------------------- learning


_TAG_JOIN = re.compile(r"(?<=[>\]}])(?=<)")
_DIGITS = re.compile(r"\d+")


def _words(text: str) -> Words:
    """A learned text as the words matched one by one: split at whitespace and between two
    adjacent tags (``><``), and a number the calls count with (``:0``, ``:1``) standing
    alone as :data:`NUMBER`."""
    out: list[str] = []
    for word in text.split():
        for piece in _TAG_JOIN.split(word):
            parts = piece.split(NUMBER)
            for n, part in enumerate(parts):
                if n:
                    out.append(NUMBER)
                if part:
                    out.append(part)
    return tuple(out)


def _counted(a: str, b: str) -> str | None:
    """``a`` with :data:`NUMBER` where ``a`` and ``b`` differ only in a number; None when
    they differ otherwise."""
    if a == b:
        return a
    if _DIGITS.sub("0", a) != _DIGITS.sub("0", b):
        return None
    return _DIGITS.sub(NUMBER, a)


_DECODE = json.JSONDecoder().raw_decode


def _object_at(text: str, i: int) -> tuple[Any, int] | None:
    try:
        return _DECODE(text, i)
    except ValueError:
        return None


def _value_text(value: Any) -> tuple[str, ...]:
    """The ways a template may write one argument's value as text."""
    if isinstance(value, bool):
        return ("true", "True") if value else ("false", "False")
    if isinstance(value, str):
        return (value,)
    return (json.dumps(value),)


@dataclass(frozen=True)
class _Payload:
    """Where one call's payload sits in a rendering, and what was learned inside it."""

    start: int
    end: int
    kind: str
    fields: tuple[tuple[str, Any], ...] = ()


def _json_payload(text: str, start: int, call: ToolCall) -> _Payload | None:
    """``{"name": N, "arguments": {...}}`` holding ``call``, nearest its name."""
    at = text.find(json.dumps(call.name), start)
    if at < 0:
        return None
    brace = at
    for _ in range(4):
        brace = text.rfind("{", max(start, at - _GAP), brace)
        if brace < 0:
            return None
        found = _object_at(text, brace)
        if found and isinstance(found[0], dict):
            obj, end = found
            names = [k for k, v in obj.items() if v == call.name]
            args = [k for k in ("arguments", "parameters") if obj.get(k) == call.arguments]
            rest = {k: v for k, v in obj.items() if k not in (*names[:1], *args[:1])}
            if names and args and all(isinstance(v, str) for v in rest.values()):
                fields = (("name_key", names[0]), ("args_key", args[0]))
                consts = tuple(sorted(rest.items()))
                return _Payload(brace, end, "json", (*fields, ("constants", consts)))
    return None


def _name_json_payload(text: str, start: int, call: ToolCall) -> _Payload | None:
    """``NAME`` then a short text then the arguments as a JSON object."""
    at = text.find(call.name, start)
    if at < 0:
        return None
    after = at + len(call.name)
    brace = text.find("{", after, after + _GAP)
    found = _object_at(text, brace) if brace >= 0 else None
    if found is None or found[0] != call.arguments:
        return None
    return _Payload(at, found[1], "name-json", (("name_end", text[after:brace]),))


def _tidy_opener(common: str) -> str:
    """A learned opening text starts at a tag's start, not at the end of the one before."""
    while common and (common[0] in WS or common[0] in ">])}|"):
        common = common[1:]
    return common


def _common_suffix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return a[len(a) - n :]


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _tags_payload(text: str, start: int, call: ToolCall) -> _Payload | None:
    """``NAME``, then each argument as a key and a value between learned texts."""
    at = text.find(call.name, start)
    if at < 0 or len(call.arguments) < 2:
        return None
    pos = at + len(call.name)
    spans: list[tuple[int, int, int, int]] = []  # key start/end, value start/end
    keys = sorted(call.arguments, key=lambda k: _find_or_far(text, k, pos))
    for key in keys:
        k = text.find(key, pos, pos + _GAP)
        if k < 0:
            return None
        hits = [
            (v, text.find(v, k + len(key), k + len(key) + _GAP))
            for v in _value_text(call.arguments[key])
        ]
        hits = [(v, h) for v, h in hits if h >= 0]
        if not hits:
            return None
        v, h = min(hits, key=lambda vh: vh[1])
        spans.append((k, k + len(key), h, h + len(v)))
        pos = h + len(v)
    mids = {text[ke:vs] for _, ke, vs, _ in spans}
    gaps = [text[spans[n][3] : spans[n + 1][0]] for n in range(len(spans) - 1)]
    first = text[at + len(call.name) : spans[0][0]]
    if len(mids) != 1 or len(set(gaps)) != 1:
        return None
    key_open = _tidy_opener(_common_suffix(first, gaps[0]))
    if not key_open.strip():
        return None
    value_end = gaps[0][: len(gaps[0]) - len(key_open)]
    end = spans[-1][3]
    if not text.startswith(value_end, end):
        return None
    (mid,) = mids
    fields = (
        ("name_end", first[: len(first) - len(key_open)]),
        ("key_open", key_open),
        ("key_mid", mid),
        ("value_end", value_end),
    )
    return _Payload(at, end + len(value_end), "tags", fields)


def _find_or_far(text: str, word: str, start: int) -> int:
    at = text.find(word, start)
    return at if at >= 0 else len(text)


_LEARNERS = (_json_payload, _name_json_payload, _tags_payload)


def learn_shape(one: str, two: str, calls: tuple[ToolCall, ToolCall]) -> DerivedShape | None:
    """The shape in which ``one`` writes ``calls[0]`` and ``two`` writes both calls.

    None when no learnable shape explains both renderings. The caller must still check that
    the shape's family reads both renderings back (this only learns; it proves nothing).
    """
    first, second = calls
    for learn in _LEARNERS:
        p1 = learn(one, 0, first)
        p2 = learn(two, 0, first)
        if p1 is None or p2 is None or p2.fields != p1.fields:
            continue
        p3 = learn(two, p2.end, second)
        if p3 is None:
            continue
        p1 = _count_calls(p1, p3)
        if p1 is None:
            continue
        shape = _shape(one[: p1.start], one[p1.end :], two[p2.end : p3.start], p1)
        if shape is not None and two.startswith(one[: p1.start]):
            return shape
    return None


def _count_calls(first: _Payload, second: _Payload) -> _Payload | None:
    """``first`` with the numbers that count the calls made :data:`NUMBER`, when the two
    calls' learned texts differ in those numbers only; None when they differ otherwise."""
    a, b = dict(first.fields), dict(second.fields)
    if a.keys() != b.keys():
        return None
    fields = []
    for key, value in a.items():
        if key == "constants":  # a key whose text changes from call to call holds any text
            other = dict(b[key])
            fields.append(("strings", tuple(k for k, v in value if other.get(k) != v)))
            value = tuple((k, v) for k, v in value if other.get(k) == v)
        elif isinstance(value, str):
            value = _counted(value, b[key])
            if value is None:
                return None
        fields.append((key, value))
    return _Payload(first.start, first.end, first.kind, tuple(fields))


def _shape(before: str, after: str, mid: str, payload: _Payload) -> DerivedShape | None:
    post = _common_prefix(after, mid)
    if post not in (after, mid):  # end at a tag's end, not inside the next tag
        while post and post[-1] not in WS and post[-1] not in ">])}":
            post = post[:-1]
    rest = mid[len(post) :]
    pre = _common_suffix(before, rest)
    sep = rest[: len(rest) - len(pre)]
    lead = before[: len(before) - len(pre)]
    # a thinking block before the calls is the reasoning reader's, not the calls' opening
    ends = [lead.rfind(closer) + len(closer) for closer in CLOSERS if closer in lead]
    lead = lead[max(ends, default=0) :]
    trail = after[len(post) :]
    fields = dict(payload.fields)
    texts: dict[str, Any] = {
        "opening": _words(lead + pre),
        "post": _words(post),
        "next_call": _words(sep + pre),
        "trail": _words(trail),
    }
    for key in ("name_end", "key_open", "key_mid", "value_end"):
        if key in fields:
            texts[key] = _words(fields.pop(key))
    if payload.kind == "tags":
        raw_mid = dict(payload.fields)["key_mid"]
        raw_end = dict(payload.fields)["value_end"]
        texts["value_lead"] = raw_mid[len(raw_mid.rstrip()) :]
        texts["value_tail"] = raw_end[: len(raw_end) - len(raw_end.lstrip())]
        if not texts["key_mid"] or not texts["value_end"]:
            return None
    learned = [v for v in texts.values() if isinstance(v, tuple)]
    words = [w for v in learned for w in v]
    opening = texts["opening"]
    if not opening or len(opening[0]) < 2 or any(len(w) > MAX_WORD for w in words):
        return None
    # call markup is short: a long learned text is a turn the probe could not cut (a
    # template that writes its instructions after the last turn), not a grammar
    if any(len(v) > MAX_WORDS for v in learned):
        return None
    return DerivedShape(kind=payload.kind, **texts, **fields)
