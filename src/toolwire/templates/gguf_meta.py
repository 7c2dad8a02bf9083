"""The one reader of GGUF metadata: the header and the key/value pairs, within limits.

A GGUF file is untrusted input: its header says how many pairs follow, how long each string
is and how many items each array holds, and a reader that believes those counts allocates
what they claim (a 16 MB file once took 43 s and 3.2 GB). This reader checks every count and
length against :class:`GGUFLimits` and against the bytes the file still holds *before* it
reads or allocates anything, keeps only the values its caller asks for, and skips the rest
by seeking (an array of fixed-size items at once; a string array by walking its lengths, in
linear time, without building its strings). The vocabulary (``tokenizer.ggml.tokens``, some
150,000 strings in a real model) is never built: :meth:`GGUFMetadata.array_strings` picks
the few items a caller names.

Pure parsing over a binary file object with ``seek``/``read``: no memory map, no numpy, no
tensor data. Every failure is a :class:`~toolwire.errors.GGUFError` naming the key and the
limit passed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import BinaryIO

from toolwire.errors import GGUFError

__all__ = [
    "GGUFArray",
    "GGUFLimits",
    "GGUFMetadata",
    "GGUFValue",
    "read_metadata",
    "type_name",
]

GGUF_MAGIC = b"GGUF"

# GGUF value types (the spec's numbering)
_UINT8, _INT8, _UINT16, _INT16, _UINT32, _INT32, _FLOAT32, _BOOL = range(8)
_STRING, _ARRAY, _UINT64, _INT64, _FLOAT64 = 8, 9, 10, 11, 12
_NAMES = {
    _UINT8: "UINT8", _INT8: "INT8", _UINT16: "UINT16", _INT16: "INT16", _UINT32: "UINT32",
    _INT32: "INT32", _FLOAT32: "FLOAT32", _BOOL: "BOOL", _STRING: "STRING", _ARRAY: "ARRAY",
    _UINT64: "UINT64", _INT64: "INT64", _FLOAT64: "FLOAT64",
}  # fmt: skip
_FORMATS = {
    _UINT8: "<B", _INT8: "<b", _UINT16: "<H", _INT16: "<h", _UINT32: "<I", _INT32: "<i",
    _FLOAT32: "<f", _BOOL: "<?", _UINT64: "<Q", _INT64: "<q", _FLOAT64: "<d",
}  # fmt: skip
_SIZES = {kind: struct.calcsize(form) for kind, form in _FORMATS.items()}
#: The fewest bytes an item of a variable-size type takes (a string's length; an array's
#: item type and count): what bounds a claimed count by the bytes left.
_LEAST = {_STRING: 8, _ARRAY: 12}
_CHUNK = 1 << 16
_U64 = struct.Struct("<Q")
#: A string array's walk keeps the offset of every this many items (:class:`GGUFArray`).
_MARK_EVERY = 1024

#: A value read: a number, a flag, a string, or a list of them (arrays the caller asked for).
GGUFValue = int | float | bool | str | list["GGUFValue"]


def type_name(kind: int) -> str:
    """The spec's name of a GGUF value type (``UINT32``, ``STRING`` …), for messages."""
    return _NAMES.get(kind, f"type {kind}")


@dataclass(frozen=True)
class GGUFLimits:
    """What one file's metadata may claim. A real model's stay far inside: some 30 pairs,
    keys under 100 bytes, templates under 100 KB, a vocabulary of 150,000–260,000 tokens and
    metadata of a few megabytes."""

    #: key/value pairs in the header
    pairs: int = 1 << 16
    #: bytes of one key
    key: int = 1 << 12
    #: bytes of a chat template (``tokenizer.chat_template`` and its named variants)
    template: int = 16 << 20
    #: bytes of any other string kept
    string: int = 1 << 16
    #: items of one array
    items: int = 1 << 20
    #: arrays inside arrays
    depth: int = 4
    #: bytes of the whole metadata, header to the last pair
    total: int = 64 << 20
    #: items of a string array kept whole (a list of template names; not a vocabulary)
    kept_items: int = 1 << 10


@dataclass(frozen=True)
class GGUFArray:
    """Where an array's items are, its item type and count (its items are not read)."""

    item: int
    count: int
    offset: int
    #: for a string array: the offset of every ``_MARK_EVERY``-th item, from one walk
    marks: tuple[int, ...] = ()


@dataclass
class GGUFMetadata:
    """The pairs asked for, and every pair's type (``types``; arrays ``ARRAY/STRING``)."""

    source: str
    version: int
    values: dict[str, GGUFValue] = field(default_factory=dict)
    types: dict[str, tuple[int, ...]] = field(default_factory=dict)
    arrays: dict[str, GGUFArray] = field(default_factory=dict)
    _file: BinaryIO | None = field(default=None, repr=False)
    _limits: GGUFLimits = field(default_factory=GGUFLimits, repr=False)

    def array_strings(self, key: str, indices: Iterable[int]) -> dict[int, str]:
        """Items ``indices`` of string array ``key`` (one walk over its lengths, keeping only
        those), while the file is still open. Indices outside the array are left out."""
        if self._file is None:
            raise GGUFError(f"{self.source}: the file is closed; {key} can no longer be read")
        found = self.arrays.get(key)
        wanted = set(indices)
        if found is None or found.item != _STRING or not wanted:
            return {}
        picked: dict[int, str] = {}
        for want in sorted(i for i in wanted if 0 <= i < found.count):
            mark = want // _MARK_EVERY
            at = found.marks[mark] if mark < len(found.marks) else found.offset
            first = mark * _MARK_EVERY if mark < len(found.marks) else 0
            cursor = _Cursor(self._file, self.source, at, self._size())
            cursor.skip_strings(want - first, _MARK_EVERY)
            size = cursor.u64()
            _check(size, self._limits.string, f"a string of {key}", self.source)
            picked[want] = _text(cursor.take(size), key, self.source)
        return picked

    def _size(self) -> int:
        assert self._file is not None
        return self._file.seek(0, 2)


def read_metadata(
    file: BinaryIO,
    want: Callable[[str], bool],
    *,
    source: str = "the file",
    limits: GGUFLimits | None = None,
) -> GGUFMetadata:
    """Walk the metadata of the GGUF file open in ``file`` (at its start), keeping the values
    of the keys ``want`` accepts; every other value is skipped unread. Arrays kept are the
    small ones (``limits.kept_items``); every array's position is in ``arrays`` so that
    :meth:`GGUFMetadata.array_strings` can pick items of a larger one while ``file`` is open.
    ``source`` names the file in errors."""
    bounds = limits or GGUFLimits()
    size = file.seek(0, 2)
    cursor = _Cursor(file, source, 0, size)
    magic = cursor.take(min(4, size))
    if magic != GGUF_MAGIC:
        raise GGUFError(f"{source}: not a GGUF file (starts with {magic!r}, not {GGUF_MAGIC!r})")
    version = cursor.u32()
    if version < 2:
        raise GGUFError(f"{source}: GGUF version {version} is not read (only 2 and later)")
    tensors = cursor.u64()
    _check(tensors, bounds.pairs, "the header's count of tensors", source)
    pairs = cursor.u64()
    _check(pairs, bounds.pairs, "the header's count of metadata pairs", source)
    meta = GGUFMetadata(source, version, _file=file, _limits=bounds)
    for _ in range(pairs):
        key_size = cursor.u64()
        _check(key_size, bounds.key, "a metadata key's length", source)
        key = _text(cursor.take(key_size), "a metadata key", source)
        kind = cursor.u32()
        if kind == _ARRAY:
            item, count = cursor.u32(), cursor.u64()
            meta.types[key] = (_ARRAY, item) if count else (_ARRAY,)
            offset = cursor.at
            if want(key) and item == _STRING and count <= bounds.kept_items:
                meta.values[key] = [
                    _string(cursor, key, bounds.string, source) for _ in range(count)
                ]
                marks: tuple[int, ...] = ()
            else:
                marks = _skip_items(cursor, key, item, count, bounds, 1, source)
            meta.arrays[key] = GGUFArray(item, count, offset, marks)
        elif kind == _STRING:
            meta.types[key] = (kind,)
            if want(key):
                bound = (
                    bounds.template if key.startswith("tokenizer.chat_template") else bounds.string
                )
                meta.values[key] = _string(cursor, key, bound, source)
            else:
                _skip_value(cursor, key, kind, bounds, 0, source)
        elif kind in _FORMATS:
            meta.types[key] = (kind,)
            raw = cursor.take(_SIZES[kind])
            if want(key):
                (meta.values[key],) = struct.unpack(_FORMATS[kind], raw)
        else:
            raise GGUFError(f"{source}: metadata {key} has unknown GGUF value type {kind}")
        if cursor.at > bounds.total:
            raise GGUFError(
                f"{source}: the metadata passes {bounds.total} bytes at {key} "
                "(the bound on a GGUF file's metadata)"
            )
    alignment = meta.values.get("general.alignment", 32) if want("general.alignment") else 32
    _check_tensors(cursor, tensors, alignment if isinstance(alignment, int) else 32, bounds)
    return meta


#: Bytes per block and elements per block of the tensor types whose size is checked (F32,
#: F16, the common quantisations, BF16); a tensor of another type has only its offset checked.
_BLOCKS = {
    0: (4, 1), 1: (2, 1), 2: (18, 32), 3: (20, 32), 6: (22, 32), 7: (24, 32), 8: (34, 32),
    10: (84, 256), 11: (110, 256), 12: (144, 256), 13: (176, 256), 14: (210, 256), 30: (2, 1),
}  # fmt: skip


def _check_tensors(cursor: _Cursor, count: int, alignment: int, bounds: GGUFLimits) -> None:
    """Walk the tensor table after the metadata (names, shapes, types, offsets; no data) and
    check that each tensor's data lies inside the file: a file cut short is refused here, not
    by the engine that loads it."""
    source = cursor._source
    ends = []
    for _ in range(count):
        name_size = cursor.u64()
        _check(name_size, bounds.key, "a tensor name's length", source)
        cursor.skip(name_size)
        dims = cursor.u32()
        _check(dims, 8, "a tensor's count of dimensions", source)
        elements = 1
        for _ in range(dims):
            elements *= cursor.u64()
        kind, offset = cursor.u32(), cursor.u64()
        size, per = _BLOCKS.get(kind, (0, 1))
        ends.append(offset + -(-elements // per) * size)
    if alignment < 1:
        raise GGUFError(f"{source}: general.alignment is {alignment}, not a positive number")
    start = -(-cursor.at // alignment) * alignment
    if count and start + max(ends) > cursor._size:
        raise GGUFError(f"{source}: its tensor data is cut short (runs past the file)")


def _check(claimed: int, bound: int, what: str, source: str) -> None:
    if claimed > bound:
        raise GGUFError(f"{source}: {what} is {claimed}, past the bound of {bound}")


def _text(raw: bytes, key: str, source: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise GGUFError(f"{source}: metadata {key} is not valid UTF-8") from None


def _string(cursor: _Cursor, key: str, bound: int, source: str) -> str:
    size = cursor.u64()
    _check(size, bound, f"the length of {key}", source)
    return _text(cursor.take(size), key, source)


def _skip_value(
    cursor: _Cursor, key: str, kind: int, bounds: GGUFLimits, depth: int, source: str
) -> None:
    if kind == _STRING:
        cursor.skip(cursor.u64())
    elif kind == _ARRAY:
        item, count = cursor.u32(), cursor.u64()
        _skip_items(cursor, key, item, count, bounds, depth + 1, source)
    elif kind in _SIZES:
        cursor.skip(_SIZES[kind])
    else:
        raise GGUFError(f"{source}: metadata {key} holds unknown GGUF value type {kind}")


def _skip_items(
    cursor: _Cursor, key: str, item: int, count: int, bounds: GGUFLimits, depth: int, source: str
) -> tuple[int, ...]:
    """Past ``count`` items of type ``item``: each claim checked before a byte is walked.
    For strings, the offsets the walk marked (:meth:`_Cursor.skip_strings`)."""
    _check(depth, bounds.depth, f"the nesting of arrays in {key}", source)
    _check(count, bounds.items, f"the item count of {key}", source)
    least = _SIZES.get(item) or _LEAST.get(item)
    if least is None:
        raise GGUFError(f"{source}: metadata {key} holds unknown GGUF value type {item}")
    if count * least > cursor.left():
        raise GGUFError(f"{source}: metadata {key} runs past the end of the file")
    if item in _SIZES:
        cursor.skip(count * least)
        return ()
    if item == _STRING:
        return cursor.skip_strings(count, _MARK_EVERY)
    for _ in range(count):
        _skip_value(cursor, key, item, bounds, depth, source)
    return ()


class _Cursor:
    """Reads a file forward through a buffer of its own; every read first checked against
    the bytes left, so a claimed length past the file is an error, never an allocation."""

    def __init__(self, file: BinaryIO, source: str, at: int, size: int) -> None:
        self._file = file
        self._source = source
        self._size = size
        self._start = at  # the file offset of the buffer's first byte
        self._buffer = b""
        self._pos = 0
        file.seek(at)

    @property
    def at(self) -> int:
        return self._start + self._pos

    def left(self) -> int:
        return self._size - self.at

    def take(self, n: int) -> bytes:
        if n > self.left():
            raise GGUFError(f"{self._source}: its GGUF metadata is cut short (runs past the file)")
        end = self._pos + n
        if end <= len(self._buffer):
            data = self._buffer[self._pos : end]
            self._pos = end
            return data
        head = self._buffer[self._pos :]
        rest = n - len(head)
        self._pos = len(self._buffer)
        self._refill(rest)
        data = head + self._buffer[:rest]
        self._pos = rest
        return data

    def skip(self, n: int) -> None:
        if n > self.left():
            raise GGUFError(f"{self._source}: its GGUF metadata is cut short (runs past the file)")
        if self._pos + n <= len(self._buffer):
            self._pos += n
            return
        self._reload(self.at + n, 0)

    def skip_strings(self, count: int, every: int) -> tuple[int, ...]:
        """Past ``count`` strings, walking their lengths through the buffer; the offset of
        every ``every``-th string, so that one can later be found without walking it all."""
        marks: list[int] = []
        unpack = _U64.unpack_from
        buffer, pos = self._buffer, self._pos
        for index in range(count):
            if pos + 8 > len(buffer):
                self._reload(self._start + pos, 8)
                buffer, pos = self._buffer, 0
            if index % every == 0:
                marks.append(self._start + pos)
            pos += 8 + unpack(buffer, pos)[0]
        if pos <= len(buffer):
            self._pos = pos
        else:
            self._reload(self._start + pos, 0)
        return tuple(marks)

    def _reload(self, at: int, least: int) -> None:
        """Move to file offset ``at`` and buffer at least ``least`` bytes from there."""
        if at + least > self._size:
            raise GGUFError(f"{self._source}: its GGUF metadata is cut short (runs past the file)")
        self._start, self._pos = at, 0
        self._file.seek(at)
        self._buffer = self._file.read(max(least, min(_CHUNK, self._size - at))) if least else b""
        if len(self._buffer) < least:
            raise GGUFError(f"{self._source}: its GGUF metadata is cut short (a read fell short)")

    def u32(self) -> int:
        value: int = struct.unpack("<I", self.take(4))[0]
        return value

    def u64(self) -> int:
        value: int = struct.unpack("<Q", self.take(8))[0]
        return value

    def _refill(self, least: int) -> None:
        """Read the next buffer from the current position (at least ``least`` bytes, which
        the caller checked the file holds)."""
        self._reload(self.at, least)
