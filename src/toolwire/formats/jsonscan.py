"""Following one JSON object as it streams, without re-reading it.

The scanner tracks just enough structure to know where the object ends, where the value of
one key (the call's arguments) begins and ends, and what the ``name`` key says — so a
stream can announce the call and pass its arguments on while the model is still writing
them. It checks structure only; the finished object is then read by ``json`` once, strictly.
Nesting deeper than the limit fails at once, before anything recursive sees it.

A raw line break or tab inside a JSON string (a model writing code into an argument) is no
JSON, but its meaning is plain. When the reader allows it (``raw_controls``, set by a reader
that is not strict and names the repair), the scanner writes each one as its escape in the
text it gives (``text``, ``piece``, the streamed value), so what follows reads strict JSON and
what streams is already the JSON a client can run; ``raw_count`` says how many it escaped.
Other control characters still fail the object. A string that broke JSON's rules so is not
trusted to run across the reader's own call marker (``stops``): a call cut short inside a
string must not swallow the call written after it, so the object fails where the marker
starts (and a piece that may be the marker's start is left unread at a chunk's end, for the
reader to hold back and feed again with the next chunk).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Callable

from .base import MAX_JSON_DEPTH

__all__ = ["ObjectScanner"]

_IN_STRING = re.compile(r'["\\\x00-\x1f]')
_IN_VALUE = re.compile(r'["{}\[\]]')
_WS = " \t\r\n"
#: The raw control characters a string may hold when allowed, and the escape each becomes.
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_PRIM_END = _WS + ",}"

# states at the object's own level
_BEGIN, _KEY_WAIT, _KEY, _COLON, _VAL_WAIT, _VAL, _PRIM, _AFTER, _DONE, _FAILED = range(10)


class ObjectScanner:
    """Scans one JSON object, fed as successive ``(text, start)`` pieces.

    ``feed`` returns the index just past the closing brace once the object is complete, the
    index of the offending character when the text cannot be a JSON object (``failed`` is
    then set), or ``len(text)`` when it needs more.
    """

    def __init__(
        self,
        *,
        name_key: str = "name",
        stream_key: str | tuple[str, ...] | None = None,
        on_name: Callable[[str], None] | None = None,
        on_stream: Callable[[str], None] | None = None,
        max_depth: int = MAX_JSON_DEPTH,
        key_is_name: bool = False,
        raw_controls: bool = False,
    ) -> None:
        self._name_key = name_key
        #: The object's first key is the name (``{"NAME": {...}}``): its value is streamed.
        self._key_is_name = key_is_name
        #: The keys whose value streams (one, or a family's equal choices of arguments key).
        self._stream_keys = (stream_key,) if isinstance(stream_key, str) else (stream_key or ())
        self._on_name = on_name
        self._on_stream = on_stream
        self._max_depth = max_depth
        self._state = _BEGIN
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._capture: list[str] | None = None  # the key or name string being read
        self._key = ""
        self._value_key = ""
        self._streaming = False
        #: How often the streamed key occurred: more than once, and its text is ambiguous.
        self.stream_key_count = 0
        self.parts: list[str] = []
        #: Raw line breaks and tabs in strings are read, escaped (see the module docstring).
        self.raw_controls = raw_controls
        #: How many raw controls were escaped so far.
        self.raw_count = 0
        #: The text the last ``feed`` consumed, escaped as ``text`` is.
        self.piece = ""
        self._raw_at: list[int] = []  # where raw controls sit in the chunk being fed
        #: Texts a string holding a raw control may not run across (the reader's marker).
        self.stops: tuple[str, ...] = ()
        self._raw_string = False  # the string being read holds a raw control
        self._stop_search: re.Pattern[str] | None = None

    @property
    def done(self) -> bool:
        return self._state == _DONE

    @property
    def over(self) -> bool:
        """Done, or failed: the object reads no more (one look where a reader asks both)."""
        return self._state >= _DONE

    @property
    def failed(self) -> bool:
        return self._state == _FAILED

    @property
    def depth(self) -> int:
        """How many objects and lists are open where the scan stopped (the object's own
        included): where a reader that skips a broken object goes on from."""
        return self._depth

    @property
    def in_string(self) -> bool:
        """Whether the scan stopped inside a string."""
        return self._in_string

    def text(self) -> str:
        """The object's text as written (complete once ``done``)."""
        return "".join(self.parts)

    def feed(self, s: str, i: int) -> int:
        start = i
        self._raw_at = []
        end = self._run(s, i)
        self.piece = ""
        if self._state != _FAILED and end > start:
            self.piece = self._escaped(s, start, end)
            self.parts.append(self.piece)
        return end

    def _escaped(self, s: str, start: int, end: int) -> str:
        """``s[start:end]`` with the raw controls found in its strings escaped."""
        at = self._raw_at
        k = bisect_left(at, start) if at else 0
        if k == len(at) or at[k] >= end:
            return s[start:end]
        out: list[str] = []
        pos = start
        while k < len(at) and at[k] < end:  # only the positions in this piece: linear
            j = at[k]
            out.append(s[pos:j])
            out.append(_ESCAPES[s[j]])
            pos = j + 1
            k += 1
        out.append(s[pos:end])
        return "".join(out)

    # ---------------------------------------------------------------- internals

    def _run(self, s: str, i: int) -> int:
        n = len(s)
        cap_from = i  # where the current capture / stream piece starts in this chunk
        while i < n:
            if self._in_string:
                if self._escape:
                    self._escape = False
                    i += 1
                    continue
                guarded = self._raw_string and bool(self.stops)
                m = (self._stops() if guarded else _IN_STRING).search(s, i)
                if m is None:
                    if guarded:  # what may be a stop's start is left for the next chunk
                        n -= self._stop_start(s, i, n)
                    i = n
                    break
                j = m.start()
                if len(m.group()) > 1 or m.group() in self.stops:
                    return self._fail(j)  # the marker: the string was cut short before it
                if s[j] == "\\":
                    self._escape = True
                    i = j + 1
                    continue
                if s[j] != '"':  # a raw control character: no JSON string holds one
                    if guarded:
                        k = self._stop_start(s, i, n)
                        if k and n - k <= j:  # a stop cut short holds it: the next chunk decides
                            n -= k
                            i = n
                            break
                    if not (self.raw_controls and s[j] in _ESCAPES):
                        return self._fail(j)
                    self._raw_at.append(j)
                    self.raw_count += 1
                    self._raw_string = True
                    i = j + 1
                    continue
                # the string closes at j
                self._in_string = False
                self._raw_string = False
                i = j + 1
                if self._capture is not None:
                    self._capture.append(self._escaped(s, cap_from, j))
                    self._string_closed()
                if self._state == _VAL and self._depth == 1:
                    self._value_done(s, cap_from, i)
                continue
            state = self._state
            c = s[i]
            if state == _VAL:
                m = _IN_VALUE.search(s, i)
                if m is None:
                    i = n
                    break
                j = m.start()
                c = s[j]
                i = j + 1
                if c == '"':
                    self._in_string = True
                elif c in "{[":
                    if self._depth == self._max_depth:
                        return self._fail(j)  # at the bracket too many: ``depth`` before it
                    self._depth += 1
                else:
                    self._depth -= 1
                    if self._depth == 1:
                        self._value_done(s, cap_from, i)
                continue
            if state == _PRIM:
                if c in _PRIM_END:
                    self._value_done(s, cap_from, i)
                    continue  # the same character, now after the value
                i += 1
                continue
            if c in _WS:
                i += 1
                continue
            if state == _BEGIN:
                if c != "{":
                    return self._fail(i)
                self._depth = 1
                self._state = _KEY_WAIT
            elif state == _KEY_WAIT:
                if c == '"':
                    self._state = _KEY
                    self._in_string = True
                    self._capture = []
                    cap_from = i + 1
                elif c == "}":
                    self._state = _DONE
                    return i + 1
                else:
                    return self._fail(i)
            elif state == _COLON:
                if c != ":":
                    return self._fail(i)
                self._state = _VAL_WAIT
            elif state == _VAL_WAIT:
                self._value_key = self._key
                self._streaming = self._value_key in self._stream_keys
                if self._streaming:
                    self.stream_key_count += 1
                cap_from = i
                if c == '"':
                    self._state = _VAL
                    self._in_string = True
                    if self._value_key == self._name_key and not self._key_is_name:
                        self._capture = []
                        cap_from = i + 1
                elif c in "{[":
                    self._state = _VAL
                    self._depth = 2
                elif c in ",}]:":
                    return self._fail(i)
                else:
                    self._state = _PRIM
            elif state == _AFTER:
                if c == ",":
                    self._state = _KEY_WAIT
                elif c == "}":
                    self._state = _DONE
                    return i + 1
                else:
                    return self._fail(i)
            i += 1
        # out of text: pass on what we have of a streamed value or a capture
        if self._in_string and self._capture is not None:
            self._capture.append(self._escaped(s, cap_from, n))
        elif self._streaming and self._state in (_VAL, _PRIM) and self._on_stream and n > cap_from:
            self._on_stream(self._escaped(s, cap_from, n))
        return n

    def _stops(self) -> re.Pattern[str]:
        """What ends the search in a string holding a raw control: its end, or a stop."""
        if self._stop_search is None:
            alternatives = "|".join(re.escape(stop) for stop in self.stops)
            self._stop_search = re.compile(_IN_STRING.pattern + "|" + alternatives)
        return self._stop_search

    def _stop_start(self, s: str, i: int, n: int) -> int:
        """How long the end of ``s[i:n]`` is that may begin a stop (0 when none)."""
        for k in range(min(n - i, max(map(len, self.stops)) - 1), 0, -1):
            tail = s[n - k : n]
            if any(stop.startswith(tail) for stop in self.stops):
                return k
        return 0

    def _string_closed(self) -> None:
        raw = "".join(self._capture or ())
        self._capture = None
        try:
            value = json.loads('"' + raw + '"')
        except ValueError:
            value = raw
        if self._state == _KEY:
            self._key = value
            self._state = _COLON
            if self._key_is_name and isinstance(value, str):
                if not self._stream_keys:
                    self._stream_keys = (value,)
                if self._on_name is not None:
                    self._on_name(value)
        elif self._on_name is not None and isinstance(value, str):
            self._on_name(value)

    def _value_done(self, s: str, start: int, end: int) -> None:
        if self._streaming and self._on_stream is not None and end > start:
            self._on_stream(self._escaped(s, start, end))
        self._streaming = False
        self._state = _AFTER

    def _fail(self, i: int) -> int:
        self._state = _FAILED
        return i
