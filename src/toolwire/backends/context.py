"""The context a local model is loaded with when none is given: its trained context, within
memory.

A coding agent's first request is large (Claude Code's: a system prompt and some twenty
tool schemas, about 20,000 tokens), so the 4,096 tokens a chat needs do not hold it. The
context a model was trained for is in its GGUF metadata (``<arch>.context_length``); the
memory it costs is mostly the key/value cache, whose size per token the same metadata
gives (layers × key/value heads × the key and value widths × 2 bytes, at f16). The default
is the trained context, cut down (to a multiple of 256) until that cache takes at most a
quarter of the machine's memory, and never below 4,096 tokens (what it was before).

Only the metadata header is read, and read here rather than through the ``gguf`` package,
which parses every field, the whole vocabulary included (twelve seconds for the default
model on a shared core): this walks the key/value pairs once, in linear time, each length
checked against the file, and stops at the tensors. The figures measured on the default
model (qwen2.5-coder-0.5b, trained for 32,768): resident set 0.70 GB at 4,096 tokens,
1.05 GB at 32,768, loading in 1.2 s and 1.5 s.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import GGUFError

__all__ = ["FLOOR_CTX", "ModelShape", "agent_context", "model_shape"]

#: The least context the default gives (a model trained for less gets its own).
FLOOR_CTX = 4096
#: The share of the machine's memory the key/value cache of the default context may take.
MEMORY_SHARE = 0.25
#: Bounds of the header walk: key/value pairs, a key's bytes, an array's items.
_MAX_PAIRS = 1 << 16
_MAX_KEY = 1 << 16
_MAX_ITEMS = 1 << 26

# GGUF value types: their sizes (fixed-size ones), 8 string, 9 array
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_INTS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class ModelShape:
    """What the default context is decided from: the trained context and the key/value
    cache's bytes per token (0 when the metadata does not say)."""

    trained: int
    kv_bytes_per_token: int


def model_shape(path: str | os.PathLike[str]) -> ModelShape:
    """The shape of the model in GGUF file ``path``; :class:`GGUFError` when its header
    cannot be read or gives no ``<arch>.context_length``."""
    file = Path(path)
    try:
        with file.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as m:
            values = _scalars(m)
    except (OSError, ValueError) as exc:
        raise GGUFError(f"{file}: cannot read its GGUF header: {exc}") from None
    except struct.error:
        raise GGUFError(f"{file}: its GGUF header is cut short") from None
    arch = values.get("general.architecture")
    trained = values.get(f"{arch}.context_length")
    if not isinstance(arch, str) or not isinstance(trained, int) or trained < 1:
        raise GGUFError(f"{file}: its GGUF header gives no context length")

    def number(key: str) -> int:
        value = values.get(f"{arch}.{key}")
        return value if isinstance(value, int) and value > 0 else 0

    heads = number("attention.head_count")
    kv_heads = number("attention.head_count_kv") or heads
    width = number("embedding_length") // heads if heads else 0
    keys, vals = number("attention.key_length") or width, number("attention.value_length") or width
    per_token = number("block_count") * kv_heads * (keys + vals) * 2
    return ModelShape(trained, per_token)


def agent_context(path: str | os.PathLike[str], memory: int | None = None) -> int:
    """The context to load the model at ``path`` with when none is given: see the module.
    ``memory``: the machine's memory in bytes (None: read from the system)."""
    shape = model_shape(path)
    total = memory if memory is not None else _physical_memory()
    ctx = shape.trained
    if shape.kv_bytes_per_token and total:
        fits = int(total * MEMORY_SHARE) // shape.kv_bytes_per_token
        ctx = min(ctx, fits // 256 * 256)
    return max(ctx, min(FLOOR_CTX, shape.trained))


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # not a POSIX system: no cap
        return 0


def _scalars(m: mmap.mmap) -> dict[str, int | str]:
    """The header's integer and string values by key (arrays and floats skipped)."""
    if m[:4] != b"GGUF":
        raise ValueError("not a GGUF file")
    (version,) = struct.unpack_from("<I", m, 4)
    if version < 2:
        raise ValueError(f"GGUF version {version} is not read")
    (pairs,) = struct.unpack_from("<Q", m, 16)
    if pairs > _MAX_PAIRS:
        raise ValueError(f"{pairs} metadata pairs is past the bound of {_MAX_PAIRS}")
    at = 24
    values: dict[str, int | str] = {}
    for _ in range(pairs):
        key, at = _string(m, at, _MAX_KEY)
        (kind,) = struct.unpack_from("<I", m, at)
        at += 4
        if kind in _INTS:
            (values[key],) = struct.unpack_from(_INTS[kind], m, at)
        if kind == _STRING:
            text, at = _string(m, at, len(m))
            values[key] = text
        else:
            at = _skip(m, at, kind)
    return values


def _string(m: mmap.mmap, at: int, bound: int) -> tuple[str, int]:
    (size,) = struct.unpack_from("<Q", m, at)
    if size > bound or at + 8 + size > len(m):
        raise ValueError("a string runs past the file")
    return m[at + 8 : at + 8 + size].decode("utf-8", "replace"), at + 8 + size


def _skip(m: mmap.mmap, at: int, kind: int) -> int:
    """Past one value of ``kind`` at ``at`` (a string's value already read)."""
    if kind in _SIZES:
        return at + _SIZES[kind]
    if kind == _STRING:
        return at  # read by the caller
    if kind != _ARRAY:
        raise ValueError(f"unknown GGUF value type {kind}")
    item, count = struct.unpack_from("<IQ", m, at)
    at += 12
    if count > _MAX_ITEMS:
        raise ValueError(f"an array of {count} items is past the bound of {_MAX_ITEMS}")
    if item in _SIZES:
        end: int = at + _SIZES[item] * count
        if end > len(m):
            raise ValueError("an array runs past the file")
        return end
    if item == _STRING:
        for _ in range(count):
            (size,) = struct.unpack_from("<Q", m, at)
            at += 8 + size
            if at > len(m):
                raise ValueError("an array runs past the file")
        return at
    raise ValueError(f"an array of GGUF value type {item} is not read")
