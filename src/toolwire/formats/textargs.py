"""Arguments written one value at a time as text, passed on as the JSON of that mapping.

The XML-like families (GLM's ``<arg_key>``/``<arg_value>``, MiniMax's ``<parameter>``) write
each argument's value as the text between two tags: strings verbatim, other values as the
JSON they spell. The reader keeps that text (the call is marked ``text_values``, so the
argument pipeline types each value by the tool's schema) and streams the argument text as
the JSON of the mapping of strings while it grows.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from ..messages import ToolCall
from .base import ReplyStream, json_text, loads_json
from .markerstream import Body, MarkerStream
from .scan import Markers

__all__ = [
    "HELD",
    "MAX_NAME",
    "NameReader",
    "TextArgs",
    "TextBody",
    "read_held",
]

#: The longest tool or parameter name read.
MAX_NAME = 256


#: What no name holds, by default: whitespace and markup.
_BAD_NAME = re.compile(r"[\s<>{}\[\]\"'=]")


@functools.cache
def _stop_or_bad(stops: str, bad: str) -> re.Pattern[str]:
    """The first character that ends a name (one of ``stops``) or that no name holds."""
    return re.compile("[" + re.escape(stops) + "]|" + bad)


#: A text value opening with one of these is held until whole: it may be JSON to read.
HELD = '"{['


def read_held(text: str) -> tuple[str, str]:
    """``(value, repair)``: a held text value as read, and the repair that took ("" for none).

    Templates write a string value as it is and any other value as its JSON. What models
    write besides, read as SGLang's GLM detector reads it: a value written as a JSON string
    (``"Paris"``) is that string, as a JSON value would be for any other type (a value meant
    to be quoted text is rare; a template never quotes a string); a JSON object or list
    written with its quotes escaped (``{\\"a\\": 1}``, what a model copies from JSON it
    saw) is that JSON. Anything else is the text as written.
    """
    try:
        value = loads_json(text)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, str) and text.startswith('"'):
        return value, "a JSON string read as its text"
    if value is not None or text.startswith('"') or '\\"' not in text:
        return text, ""  # JSON as the grammar writes it, or text
    try:
        unescaped = loads_json('"' + text + '"')
        inner = loads_json(unescaped)
    except (ValueError, RecursionError):
        return text, ""
    if isinstance(inner, (dict, list)):
        return unescaped, "JSON written with its quotes escaped read as that JSON"
    return text, ""


class NameReader:
    """A name read up to the first of its ``stops``, across chunks.

    A name holding whitespace or markup (``<>{}[]"'=``) is no name: the body fails. The
    stop itself is not consumed. Each character is looked at once, and no further than a
    name may reach: a reply of many markers, each opening a name whose stop never comes,
    must not be read once per marker (quadratic).

    ``bad`` is what no name holds in this grammar (DeepSeek's names may hold ``[]=``, not
    backticks). :meth:`read` fails the body itself; :meth:`feed` leaves that to its caller,
    saying what broke in ``problem``.
    """

    def __init__(self, stops: str, what: str, *, bad: re.Pattern[str] = _BAD_NAME) -> None:
        #: The characters that end a name.
        self.stops = stops
        self._stops = frozenset(stops)
        self._bad = bad
        self._first = _stop_or_bad(stops, bad.pattern)
        self._what = what
        self._parts: list[str] = []
        self._size = 0
        #: What broke the name :meth:`feed` read ("" while nothing did).
        self.problem = ""

    @property
    def pending(self) -> bool:
        """Part of a name was read, its stop not yet."""
        return bool(self._parts)

    def _look(self, s: str, i: int) -> tuple[int, int]:
        """``(stop, bad)``: where the name's stop is in ``s[i:]`` and where the name breaks
        (a character no name holds, or the one past its length limit); -1 for neither."""
        room = MAX_NAME - self._size
        end = min(len(s), i + room + 1)
        m = self._first.search(s, i, end)
        if m is not None:
            return (m.start(), -1) if m.group() in self._stops else (-1, m.start())
        return -1, (i + room if end - i > room else -1)

    def read(self, body: Body, s: str, i: int) -> tuple[str | None, int]:
        """``(name, where it stopped)``; ``None`` while more is needed or when the body failed."""
        stop, bad = self._look(s, i)
        if bad >= 0:
            body.fail(i, f"a malformed {self._what}")
            return None, i
        if stop < 0:
            self._parts.append(s[i:])
            self._size += len(s) - i
            return None, len(s)
        name = "".join(self._parts) + s[i:stop]
        self._parts = []
        self._size = 0
        if not name:
            body.fail(stop, f"an empty {self._what}")
            return None, stop
        return name, stop

    def feed(self, s: str, i: int) -> tuple[str | None, int]:
        """:meth:`read` for a caller that fails its body itself: ``(name, its stop)``;
        ``(None, len(s))`` while more is needed; ``(None, where)`` with ``problem`` set when
        the name breaks (at the character no name holds, or where a name too long began)."""
        stop, bad = self._look(s, i)
        if bad >= 0:
            if self._bad.match(s, bad):
                self.problem = f"{s[bad]!r} in the {self._what}"
                return None, bad
            self.problem = f"a {self._what} longer than {MAX_NAME} characters"
            return None, i
        if stop < 0:
            self._parts.append(s[i:])
            self._size += len(s) - i
            return None, len(s)
        name = "".join(self._parts) + s[i:stop]
        self._parts = []
        self._size = 0
        if not name:
            self.problem = f"an empty {self._what}"
            return None, stop
        return name, stop


class TextArgs:
    """The arguments of one call in progress: announced, streamed, then finished."""

    def __init__(
        self, stream: ReplyStream, name: str, call_id: str | None = None, typed: bool = False
    ) -> None:
        self.stream = stream
        self.name = name
        self.index, self.id = stream._new_call(name, call_id)
        self.args: dict[str, Any] = {}
        self._text: list[str] = []
        self._key = ""
        self._value: list[str] = []
        #: The grammar says each value's type (DSML's ``string="true|false"``): a call all
        #: of whose values said theirs is typed, not text to type by the schema.
        self.typed = typed
        self.untyped = 0
        self.closed = False  # the arguments' text is whole (see :meth:`whole`)

    @classmethod
    def start(
        cls, body: Body, name: str, call_id: str | None = None, typed: bool = False
    ) -> TextArgs:
        """Announce the call ``name`` for ``body``, which aborts it should the body fail
        (with the model's own ``call_id``, when it wrote one)."""
        call = cls(body.stream, name, call_id, typed)
        body.started.append((call.index, call.id))
        return call

    def _delta(self, text: str) -> None:
        self._text.append(text)
        self.stream._args(self.index, text)

    def open(self, key: str, said: str = "") -> bool:
        """Begin the value of ``key`` (of the type its tag ``said``: ``text``, ``json`` or
        not said); False when the call already gave it."""
        if key in self.args or key == self._key:
            return False
        self.begin(key, said)
        return True

    def begin(self, key: str, said: str = "") -> None:
        """Begin the value of ``key``, even one given before (the last one then counts); a
        value said to be JSON is streamed as written, once whole (:meth:`json_value`)."""
        self._key = key
        self._value = []
        self.untyped += not said
        if said != "json":
            self._delta(self._entry(key) + '"')

    def _entry(self, key: str) -> str:
        return ("{" if not self._text else ", ") + json.dumps(key, ensure_ascii=False) + ": "

    def json_value(self, value: Any, text: str) -> None:
        """The current value, said to be JSON, is ``value``, written as ``text``: streamed
        once whole (its text is JSON only then)."""
        self.args[self._key] = value
        self._delta(self._entry(self._key) + text.strip())
        self._key = ""

    def whole(self, args: dict[str, Any], text: str) -> None:
        """The arguments came as one JSON object, written as ``text`` (already streamed)."""
        self.args = args
        self._text = [text.strip()]
        self.typed = self.closed = True

    def value(self, piece: str) -> None:
        if piece:
            self._value.append(piece)
            self._delta(json_text(piece))

    def close(self) -> None:
        """The current value is complete."""
        self.args[self._key] = "".join(self._value)
        self._key = ""
        self._value = []
        self._delta('"')

    def read(self, s: str, i: int, ends: Markers) -> tuple[int, bool]:
        """Stream the value from ``s[i]`` up to the first of ``ends``: ``(where it stopped,
        whether the value is complete)``; a complete value is closed, past its end marker."""
        j, end = ends.scan(s, i)
        self.value(s[i:j])
        if not end:
            return j, False
        self.close()
        return j + len(end), True

    def finish(self) -> ToolCall:
        if not self.closed:
            self._delta("}" if self._text else "{}")
        text_values = self.untyped > 0 or not self.typed
        return ToolCall(
            self.id, self.name, dict(self.args), "".join(self._text), text_values=text_values
        )


class TextBody(Body):
    """A body reading one call at a time whose arguments are text values (:class:`TextArgs`)."""

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.call: TextArgs | None = None

    def named(self, name: str, is_tool: bool, i: int, said: str = "") -> bool:
        """A tool's name starts its call; an argument's name opens its value (of the type
        its tag ``said``). False when the body failed: the argument was given already."""
        if is_tool:
            self.call = TextArgs.start(self, name)
            return True
        assert self.call is not None
        if self.call.open(name, said):
            return True
        self.fail(i, f"the argument {name!r} is given twice")
        return False

    def read_value(self, s: str, i: int, ends: Markers, then: int) -> tuple[int, bool]:
        """Read the current value up to the first of ``ends``; once it is complete the body
        goes on in state ``then``. ``(where it stopped, whether the value is complete)``."""
        assert self.call is not None
        i, complete = self.call.read(s, i, ends)
        if complete:
            self.state = then
        return i, complete

    def end_call(self) -> None:
        """The current call is complete: it joins ``calls``."""
        assert self.call is not None
        self.calls.append((self.call.index, self.call.finish()))
        self.call = None
