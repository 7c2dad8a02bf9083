"""Reading an upstream's reply, bounded while it is read: its body in chunks (:class:`Reply`),
cut into lines (:class:`Lines`), read as records (:class:`Records`: server-sent events or
JSON lines, or one document sent whole).

Nothing is held past its bound: a line may not grow past :data:`MAX_LINE_BYTES` nor the
reply past :data:`MAX_STREAM_BYTES`, an error body is read to :data:`MAX_ERROR_BYTES` at
most, and every chunk is awaited only until the request's deadline. The bytes counted are
the bytes that came: a body is never decoded. toolwire asks for ``identity``, and a reply in
any other ``Content-Encoding`` (a gzip bomb of a few kilobytes decodes to gigabytes, in one
piece) is refused unread, naming the encoding (:attr:`Reply.encoding`). What cannot be read is
a :class:`~toolwire.errors.BackendError` of kind ``unreadable`` (or ``timeout``, or
``refused`` for an error the provider sends mid-stream). The exchange itself is in
:mod:`toolwire.backends.http`.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, TypeVar

import httpx
import orjson

from ..errors import BackendError

__all__ = [
    "MAX_ERROR_BYTES",
    "MAX_LINE_BYTES",
    "MAX_STREAM_BYTES",
    "Lines",
    "Records",
    "Reply",
    "before",
    "decode_json",
    "encoding_of",
    "error_message",
]

#: The largest streamed reply accepted, in bytes, counted as they arrive.
MAX_STREAM_BYTES = 32 * 1024 * 1024
#: The longest line of a streamed reply (one SSE ``data:`` record, one JSON line), and the
#: largest reply sent whole as one JSON document: refused once this many bytes came
#: without the line ending.
MAX_LINE_BYTES = 8 * 1024 * 1024
#: How much of an error body is read (the rest is never fetched).
MAX_ERROR_BYTES = 64 * 1024


def error_message(text: str) -> str:
    """The provider's own words from an error body (OpenAI's and Ollama's shapes)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text[:500]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
    return text[:500]


def encoding_of(response: httpx.Response) -> str | None:
    """The ``Content-Encoding`` ``response`` came in, when it is not ``identity`` (the only
    one toolwire asks for), in printable words; else None."""
    value = response.headers.get("content-encoding", "")
    codings = [c.strip().lower() for c in value.split(",")]
    foreign = [c for c in codings if c and c != "identity"]
    if not foreign:
        return None
    shown = ", ".join(foreign)
    return "".join(c if c.isprintable() else "?" for c in shown[:60])


T = TypeVar("T")

if sys.version_info >= (3, 11):

    async def before(deadline: float, step: Awaitable[T]) -> T:
        """``step``'s result, or :class:`asyncio.TimeoutError` once the loop's clock passes
        ``deadline``."""
        async with asyncio.timeout_at(deadline):
            return await step

else:  # pragma: no cover - Python 3.10

    async def before(deadline: float, step: Awaitable[T]) -> T:
        """``step``'s result, or :class:`asyncio.TimeoutError` once the loop's clock passes
        ``deadline``."""
        remaining = deadline - asyncio.get_running_loop().time()
        return await asyncio.wait_for(step, max(0.0, remaining))


class Reply:
    """An upstream's reply as it arrives: its body in chunks, each awaited only until the
    request's deadline, the whole bounded by :data:`MAX_STREAM_BYTES`.

    ``whole`` is true when the upstream answered with one JSON document
    (``application/json``) where a stream was asked for: it is then read whole, bounded.
    ``encoding``: the ``Content-Encoding`` it came in though ``identity`` was asked for
    (see :func:`encoding_of`), whose body is refused unread; so the bytes read are the bytes
    that came (httpx's identity decoder): nothing decodes a body.
    """

    def __init__(self, response: httpx.Response, deadline: float, timeout: float) -> None:
        self.response = response
        self.deadline = deadline
        self.timeout = timeout
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        self.whole = kind == "application/json"
        self.encoding = encoding_of(response)

    async def chunks(self, limit: int = MAX_STREAM_BYTES) -> AsyncGenerator[bytes, None]:
        """The body's bytes as they come; a :class:`BackendError` past ``limit`` bytes or
        past the deadline, or at once for a body in an encoding not asked for."""
        if self.encoding is not None:
            raise BackendError(
                f"the reply came in an encoding not asked for ({self.encoding}); toolwire asks "
                "for identity and decodes none",
                kind="unreadable",
            )
        parts = self.response.aiter_bytes()  # identity: httpx's decoder passes them as came
        size = 0
        try:
            while True:
                try:
                    chunk = await before(self.deadline, anext(parts))
                except StopAsyncIteration:
                    return
                except asyncio.TimeoutError:
                    raise BackendError(
                        f"the reply did not end within the deadline of {self.timeout:g} s",
                        kind="timeout",
                    ) from None
                size += len(chunk)
                if size > limit:
                    raise BackendError(f"the reply is longer than {limit} bytes", kind="unreadable")
                yield chunk
        finally:
            close = getattr(parts, "aclose", None)  # an async generator: let it clean up
            if close is not None:
                await close()

    async def text(self, limit: int) -> tuple[str, bool]:
        """The body as text, read to ``limit`` bytes at most; and whether it was all read."""
        kept = bytearray()
        async with aclosing(self.chunks(MAX_STREAM_BYTES)) as chunks:
            async for chunk in chunks:
                kept += chunk[: limit + 1 - len(kept)]
                if len(kept) > limit:
                    return kept[:limit].decode("utf-8", "replace"), False
        return kept.decode("utf-8", "replace"), True


def decode_json(data: bytes | str) -> Any:
    """JSON read by orjson, or by the standard library where orjson refuses (``NaN``,
    ``Infinity``, which some servers write): as lenient as before, faster on the common
    case. Raises ``ValueError`` or ``RecursionError`` as :func:`json.loads` does."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


_EOL = re.compile(rb"\r\n|\r|\n")


class Lines:
    """Bytes cut into lines (LF, CRLF or CR, as SSE allows), each refused once it grows past
    ``limit`` bytes without its end: the partial line is the only thing held, so memory
    stays bounded whatever the upstream sends."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self._limit = limit
        self._held: list[bytes] = []
        self._size = 0
        self._after_cr = False  # the last chunk ended in CR: an LF next is the same end

    def feed(self, data: bytes) -> list[bytes]:
        """The lines ``data`` completes."""
        if self._after_cr and data.startswith(b"\n"):
            data = data[1:]
        self._after_cr = False
        if b"\r" not in data:  # LF only, as nearly every server sends: split in C
            out = data.split(b"\n")
            rest = out.pop()
            if out and self._held:
                self._held.append(out[0])
                out[0] = b"".join(self._held)
                self._held, self._size = [], 0
            self._hold(rest)
            return out
        out = []
        start = 0
        for end in _EOL.finditer(data):
            self._held.append(data[start : end.start()])
            out.append(b"".join(self._held))
            self._held, self._size = [], 0
            start = end.end()
            self._after_cr = end.group() == b"\r" and start == len(data)
        self._hold(data[start:])
        return out

    def _hold(self, rest: bytes) -> None:
        """Keep the start of a line not yet ended, within the limit."""
        if rest:
            self._size += len(rest)
            if self._size > self._limit:
                raise BackendError(
                    f"the reply has a line longer than {self._limit} bytes", kind="unreadable"
                )
            self._held.append(rest)

    def finish(self) -> list[bytes]:
        """The last line, when the body ended without its line end."""
        last = b"".join(self._held)
        self._held, self._size = [], 0
        return [last] if last else []


_SSE_FIELDS = (b"event:", b"id:", b"retry:", b":")


class Records:
    """The JSON objects of a streamed reply: server-sent ``data:`` lines, or JSON lines.

    Read in chunks, bounded while reading (:class:`Reply`, :class:`Lines`). After its last
    record (SSE's ``[DONE]``, or one ``is_last`` says ends it) the body is read on to its
    end, bounded and unparsed, so the connection goes back to the pool. ``ended`` tells
    whether that last record came. A record that is not JSON, or an error the provider sends
    mid-stream, is a :class:`BackendError` naming ``who`` sent it.

    An upstream that ignores ``stream: true`` and answers with one JSON document (sent as
    ``application/json``, or as SSE without any ``data:`` line) is read whole, bounded by
    :data:`MAX_LINE_BYTES`, and given as one record; ``whole`` then says so.
    """

    def __init__(
        self,
        reply: Reply,
        *,
        sse: bool,
        who: str,
        is_last: Callable[[dict[str, Any]], bool] = lambda record: False,
    ) -> None:
        self._reply = reply
        self._sse = sse
        self._who = who
        self._is_last = is_last
        self.ended = False
        self.whole = False

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        if self._reply.whole:
            text, complete = await self._reply.text(MAX_LINE_BYTES)
            if not complete:
                raise self._too_long()
            record = self._whole(text)
            if record is not None:
                yield record
            return
        lines = Lines()
        stray: list[bytes] = []  # SSE lines that are not SSE: perhaps one JSON document
        stray_size = 0
        seen = False  # a data: record came
        async with aclosing(self._reply.chunks()) as chunks:
            async for chunk in chunks:
                for line in lines.feed(chunk):
                    data = self._data(line)
                    if data is None:
                        if self._sse and not seen and line.strip():
                            stray_size += len(line) + 1
                            if stray_size > MAX_LINE_BYTES:
                                raise self._too_long()
                            stray.append(line)
                        continue
                    seen = True
                    record = self._record(data)
                    if record is not None:
                        yield record
            for line in lines.finish():
                data = self._data(line)
                if data is not None:
                    seen = True
                    record = self._record(data)
                    if record is not None:
                        yield record
                elif self._sse and not seen and line.strip():
                    stray.append(line)
        if stray and not seen:
            record = self._whole(b"\n".join(stray).decode("utf-8", "replace"))
            if record is not None:
                yield record

    def _data(self, line: bytes) -> bytes | None:
        """The payload a line carries, or None (an SSE comment or field, a blank line)."""
        if self._sse:
            if not line.startswith(b"data:"):
                return None
            return line[5:].strip()
        line = line.strip()
        return line or None

    def _record(self, data: bytes) -> dict[str, Any] | None:
        """One payload read: a record, None for one to pass over."""
        if self.ended or (data == b"[DONE]" and self._sse):
            self.ended = True
            return None
        try:
            record = decode_json(data)
        except (ValueError, RecursionError):
            shown = data[:200].decode("utf-8", "replace")
            raise BackendError(
                f"{self._who} sent a line that is not JSON: {shown}", kind="unreadable"
            ) from None
        if not isinstance(record, dict):
            return None
        self._refused(record, data)
        self.ended = self._is_last(record)
        return record

    def _whole(self, text: str) -> dict[str, Any] | None:
        """A reply sent whole as one JSON document: its one record."""
        try:
            record = json.loads(text) if text.strip() else None
        except (ValueError, RecursionError):
            raise BackendError(
                f"{self._who} sent a reply that is not JSON: {text[:200]}", kind="unreadable"
            ) from None
        if not isinstance(record, dict):
            raise BackendError(
                f"{self._who} sent a reply that is not a JSON object", kind="unreadable"
            )
        self._refused(record, text.encode("utf-8", "replace"))
        self.whole = self.ended = True
        return record

    def _refused(self, record: dict[str, Any], data: bytes) -> None:
        if isinstance(record.get("error"), (dict, str)):
            text = data.decode("utf-8", "replace")
            raise BackendError(
                f"{self._who} failed mid-stream: {error_message(text)}",
                body=text[:MAX_ERROR_BYTES],
                kind="refused",
            )

    def _too_long(self) -> BackendError:
        return BackendError(
            f"{self._who} sent a reply longer than {MAX_LINE_BYTES} bytes in one piece",
            kind="unreadable",
        )
