"""Learning a :class:`~toolwire.formats.derived.DerivedShape` from two renderings.

The template renders one call, then two; where the known names and values sit in the text
says what kind of payload it writes, and what differs between the two renderings says what
opens, separates, ends and closes calls. Learning proves nothing: detection keeps a shape
only when its family reads both renderings back exactly.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..messages import ToolCall
from .derived import CALL_ID, MAX_WORD, NUMBER, DerivedShape
from .markerstream import WS
from .reasoning import known_tags

__all__ = ["learn_shape"]

Words = tuple[str, ...]

#: How far apart the pieces of one call may be in a rendering.
_GAP = 200
#: The most words one learned text may have.
MAX_WORDS = 8


_TAG_JOIN = re.compile(r"(?<=[>\]}])(?=<)")
_DIGITS = re.compile(r"\d+")


def _words(text: str) -> Words:
    """A learned text as the words matched one by one: split at whitespace and between two
    adjacent tags (``><``), and a number the calls count with (``:0``, ``:1``) standing
    alone as :data:`NUMBER`."""
    out: list[str] = []
    for word in text.split():
        for piece in _TAG_JOIN.split(word):
            for k, chunk in enumerate(piece.split(CALL_ID)):
                if k:
                    out.append(CALL_ID)
                for n, part in enumerate(chunk.split(NUMBER)):
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
    """A learned opening text starts at a tag's start, not inside the one before.

    Two different tags may end alike: ``<tool_sep:x>`` and ``</arg_value:x>`` share ``:x>``
    (tags namespaced by a suffix), and a common suffix starting there starts inside a tag.
    Text that closes a bracket before opening one is the end of the tag before: it goes.
    """
    closer = min((i for i in (common.find(c) for c in ">])}") if i >= 0), default=-1)
    opener = min((i for i in (common.find(c) for c in "<[({") if i >= 0), default=-1)
    if closer >= 0 and (opener < 0 or closer < opener):
        common = common[closer + 1 :]
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
        ids = tuple(c.id for c in calls if len(c.id) >= 6)  # long enough to be no accident
        shape = _shape(one[: p1.start], one[p1.end :], two[p2.end : p3.start], p1, ids)
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


def _shape(
    before: str, after: str, mid: str, payload: _Payload, ids: tuple[str, ...] = ()
) -> DerivedShape | None:
    # a call's id written in the framing (the whole call object rendered) is any id, not
    # the probe's: the slot the model's own id fills
    for call_id in ids:
        before, after, mid = (t.replace(call_id, CALL_ID) for t in (before, after, mid))
    post = _common_prefix(after, mid)
    if post not in (after, mid):  # end at a tag's end, not inside the next tag
        while post and post[-1] not in WS and post[-1] not in ">])}":
            post = post[:-1]
    rest = mid[len(post) :]
    pre = _common_suffix(before, rest)
    sep = rest[: len(rest) - len(pre)]
    lead = before[: len(before) - len(pre)]
    # a thinking block before the calls is the reasoning reader's, not the calls' opening
    ends = [lead.rfind(closer) + len(closer) for closer in known_tags().closers if closer in lead]
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
