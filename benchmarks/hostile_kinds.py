"""The hostile requests of the shared-gateway benchmark (see shared_gateway.py) that cost a
gateway more than their share, and what the scripted upstream answers them with.

Each is sized as it was found (``Sizes(1.0)``); ``--scale`` shrinks the sizes that set its
cost (a count of tools, rows or calls, an argument's length, a reply's), never the shape:

- ``namespaces``: a Responses request of 16,000 ``namespace`` tools of one function each,
  every namespace named ``ns`` and two CJK characters, so that all flatten to ``ns____a`` (the
  client's names kept, the engine's names made unique in turn), a request of 2.7 MB;
- ``pattern``: a tool whose ``pattern`` is 1,201 characters of bounded repeats (57 groups of
  ``(?:a{0,30}b?){0,30}``: RE2's program is large and its DFA gives up), and the model
  writing 4,000 ``a`` and a ``!`` against it;
- ``longarg``: the same shape in 403 characters (19 groups), against 40,000 ``a`` and a ``!``;
- ``format``: the 1,201-character pattern in a ``response_format`` (``json_schema``, no
  tools), the model's text the structured output (4,000 ``a`` and a ``!``);
- ``fanout``: 1,000 distinct tools whose schemas each fan out through ``$defs`` (six
  levels of four ``$ref`` to the next: 63,690 nodes expanded, within the bound of
  100,000), a request of 1.25 MB;
- ``fancount``: the same tools to ``/v1/messages/count_tokens``;
- ``fancalls``: 128 such tools, and a reply of 128 calls, one to each;
- ``unique``: one call whose argument is 3,000 objects (38 KB) under ``uniqueItems``;
- ``stalled``: four streamed requests whose client never reads (a raw socket, a 4 KB receive
  buffer) while the model streams a reply of 4 MB, held until the honest streams are done;
- ``cardinality``: 40 requests, each naming its model with 258 random characters (the
  gateway serves one model under any name), then a scrape of ``/metrics``;
- ``gzip``: a reply sent with ``Content-Encoding: gzip`` that is 1.6 MB on the wire and
  1 GB once decompressed (a stream of text pieces).

The model streams a hostile argument 256 characters a delta, as a model streams its tokens.
Every request is made distinct (a fresh token in its tools' descriptions), as an attacker
would, so that no cache of a tool list or schema answers the second one for the first.
"""

from __future__ import annotations

import json
import re
import secrets
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

#: The mark of a hostile request, followed by its kind, in its last message.
MARK = "hostile-"
#: A hostile request's kind, as the upstream reads it.
KIND = re.compile(MARK + r"([a-z]+)")
#: The placeholder replaced by a fresh token of the same length in each hostile request.
NONCE = "nonce-0000000000000000"
#: The kinds whose request is one body to one path (the others are sent by the benchmark).
SENT_ONCE = (
    "namespaces",
    "pattern",
    "longarg",
    "format",
    "fanout",
    "fancount",
    "fancalls",
    "unique",
    "gzip",
)
#: The streamed requests of one ``stalled`` hostile request.
STALLED_EACH = 4
#: The receive buffer of a stalled reader's socket (bytes).
STALLED_BUFFER = 4096
#: The requests of one ``cardinality`` hostile request (each names a model of its own).
NAMES_EACH = 40

FAN_OUT = 4
FAN_LEVELS = 6
#: One group of bounded repeats; its nested repetition is 900, within RE2's 1,000.
_GROUP = "(?:a{0,30}b?){0,30}"
_PIECE = 256  # the characters of an argument in one streamed delta, as a model streams it


def _pattern(groups: int) -> str:
    return "^(?:" + "c?".join([_GROUP] * groups) + ")$"


BIG_PATTERN = _pattern(57)  # 1,201 characters
LONG_PATTERN = _pattern(19)  # 403 characters


@dataclass(frozen=True)
class Sizes:
    """What sets each kind's cost, at ``scale`` of the size it was found at."""

    scale: float = 1.0

    def _n(self, full: int) -> int:
        return max(1, round(full * self.scale))

    @property
    def namespaces(self) -> int:
        return self._n(16_000)

    @property
    def pattern_text(self) -> int:
        return self._n(4_000)

    @property
    def long_text(self) -> int:
        return self._n(40_000)

    @property
    def fan_tools(self) -> int:
        return self._n(1_000)

    @property
    def fan_calls(self) -> int:
        return self._n(128)

    @property
    def unique_rows(self) -> int:
        return self._n(3_000)

    @property
    def stalled_reply(self) -> int:
        return self._n(4 * 1024 * 1024)

    @property
    def names_each(self) -> int:
        return self._n(NAMES_EACH)

    @property
    def bomb(self) -> int:
        return self._n(1024 * 1024 * 1024)


# -- the upstream's streams


def sse(chunks: list[dict[str, Any]]) -> bytes:
    return (
        b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    )


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-up",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "up-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _pieces(text: str, size: int | None) -> list[str]:
    if size is None or len(text) <= size:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


def calls_reply(calls: list[tuple[str, str, str]], piece: int | None = None) -> bytes:
    """A streamed reply of whole calls (id, name, arguments), one delta each; or, with
    ``piece``, each call's arguments in deltas of that many characters, as a model streams."""
    deltas = []
    for i, (cid, name, args) in enumerate(calls):
        for j, part in enumerate(_pieces(args, piece)):
            call: dict[str, Any] = (
                {"index": i, "id": cid, "type": "function"} if j == 0 else {"index": i}
            )
            call["function"] = {"name": name, "arguments": part} if j == 0 else {"arguments": part}
            deltas.append(chunk({"role": "assistant", "tool_calls": [call]}))
    usage = {**chunk({}, "tool_calls"), "usage": {"prompt_tokens": 9, "completion_tokens": 9}}
    return sse([*deltas, usage])


def text_reply(text: str, piece: int | None = None) -> bytes:
    parts = [chunk({"role": "assistant", "content": p}) for p in _pieces(text, piece)]
    return sse([*parts, chunk({}, "stop")])


def _long_stream(size: int) -> Iterator[bytes]:
    """A text reply of ``size`` bytes, 4 KB a delta, made as it is sent."""
    yield b"data: " + json.dumps(chunk({"role": "assistant", "content": ""})).encode() + b"\n\n"
    piece = b"data: " + json.dumps(chunk({"content": "a" * 4096})).encode() + b"\n\n"
    block = piece * 16
    for _ in range(max(1, size // len(block))):
        yield block
    yield b"data: " + json.dumps(chunk({}, "stop")).encode() + b"\n\ndata: [DONE]\n\n"


def bomb(size: int) -> bytes:
    """A text reply of ``size`` bytes, gzipped (about a thousandth of it)."""
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    out = [z.compress(b"data: " + json.dumps(chunk({"role": "assistant"})).encode() + b"\n\n")]
    piece = b"data: " + json.dumps(chunk({"content": "a" * 4096})).encode() + b"\n\n"
    block = piece * (1024 * 1024 // len(piece))
    for _ in range(max(1, size // len(block))):
        out.append(z.compress(block))
    out.append(z.compress(b"data: " + json.dumps(chunk({}, "stop")).encode() + b"\n\n"))
    out.append(z.compress(b"data: [DONE]\n\n"))
    out.append(z.flush())
    return b"".join(out)


def _fan_arguments() -> str:
    """Arguments that fit a fan-out schema: one path down its levels."""
    value: Any = "x"
    for _ in range(FAN_LEVELS):
        value = {"p0": value}
    return json.dumps({"root": value})


@dataclass
class Reply:
    """The upstream's answer: a status, a body (bytes, or parts made as they are sent),
    and its headers."""

    status: int
    body: bytes | Iterator[bytes]
    headers: dict[str, str]


def hostile_reply(body: dict[str, Any], said: str, sizes: Sizes, gzipped: bytes) -> Reply | None:
    """The upstream's answer to a hostile request of one of this module's kinds (None for
    another): the argument, the calls or the stream that attacks."""
    found = KIND.search(said)
    kind = found.group(1) if found else None
    sse_kind = {"content-type": "text/event-stream"}
    if kind == "pattern":
        args = json.dumps({"q": "a" * sizes.pattern_text + "!"})
        return Reply(200, calls_reply([("call_p", "match", args)], _PIECE), sse_kind)
    if kind == "longarg":
        args = json.dumps({"q": "a" * sizes.long_text + "!"})
        return Reply(200, calls_reply([("call_l", "match", args)], _PIECE), sse_kind)
    if kind == "format":
        return Reply(
            200, text_reply(json.dumps({"q": "a" * sizes.pattern_text + "!"}), _PIECE), sse_kind
        )
    if kind == "fancalls":
        names = [t.get("function", {}).get("name", "?") for t in body.get("tools") or ()]
        args = _fan_arguments()
        calls = [(f"call_f{i}", name, args) for i, name in enumerate(names)]
        return Reply(200, calls_reply(calls), sse_kind)
    if kind == "unique":
        args = json.dumps({"rows": [{"k": i} for i in range(sizes.unique_rows)]})
        return Reply(200, calls_reply([("call_u", "rows", args)], _PIECE), sse_kind)
    if kind == "stalled":
        return Reply(200, _long_stream(sizes.stalled_reply), sse_kind)
    if kind == "gzip":
        return Reply(200, gzipped, {**sse_kind, "content-encoding": "gzip"})
    return None


# -- the hostile requests


def chat_body(text: str, tools: list[dict[str, Any]], stream: bool = True) -> dict[str, Any]:
    return {
        "model": "up-model",
        "stream": stream,
        "tools": tools,
        "messages": [{"role": "user", "content": text}],
    }


def tool(name: str, parameters: dict[str, Any], description: str = "") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def string_schema(field_name: str, pattern: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {field_name: {"type": "string", "pattern": pattern}},
        "required": [field_name],
    }


def fan_schema(i: int) -> dict[str, Any]:
    """Tool ``i``'s schema: :data:`FAN_LEVELS` levels of :data:`FAN_OUT` references to the
    next, each definition referred to :data:`FAN_OUT` times (63,690 nodes expanded)."""
    defs: dict[str, Any] = {
        f"d{j}": {
            "type": "object",
            "properties": {f"p{k}": {"$ref": f"#/$defs/d{j + 1}"} for k in range(FAN_OUT)},
        }
        for j in range(FAN_LEVELS)
    }
    defs[f"d{FAN_LEVELS}"] = {"type": "string", "description": f"a leaf of tool {i} {NONCE}"}
    return {"type": "object", "properties": {"root": {"$ref": "#/$defs/d0"}}, "$defs": defs}


def _namespaces(n: int) -> list[dict[str, Any]]:
    """``n`` namespaces of one function, each named ``ns`` and two CJK characters: one flat
    name, ``ns____a``, for all."""
    return [
        {
            "type": "namespace",
            "name": "ns" + chr(0x4E00 + i % 20_000) + chr(0x4E00 + i // 20_000),
            "description": NONCE,
            "tools": [{"type": "function", "name": "a", "parameters": {"type": "object"}}],
        }
        for i in range(n)
    ]


@lru_cache(maxsize=32)
def _template(kind: str, sizes: Sizes) -> tuple[str, bytes]:
    tag = MARK + kind
    body: dict[str, Any]
    if kind == "namespaces":
        body = {
            "model": "up-model",
            "input": tag,
            "tools": _namespaces(sizes.namespaces),
            "stream": True,
        }
        return "/v1/responses", json.dumps(body).encode()
    if kind in ("pattern", "longarg"):
        pattern = BIG_PATTERN if kind == "pattern" else LONG_PATTERN
        body = chat_body(tag, [tool("match", string_schema("q", pattern), NONCE)])
    elif kind == "format":
        body = chat_body(tag, [])
        del body["tools"]
        schema = string_schema("q", BIG_PATTERN)
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "answer", "description": NONCE, "schema": schema},
        }
    elif kind == "fanout":
        tools = [tool(f"fan_{i}", fan_schema(i), NONCE) for i in range(sizes.fan_tools)]
        body = chat_body(tag, tools)
    elif kind == "fancount":
        body = {
            "model": "up-model",
            "max_tokens": 256,
            "messages": [{"role": "user", "content": tag}],
            "tools": [
                {"name": f"fan_{i}", "description": NONCE, "input_schema": fan_schema(i)}
                for i in range(sizes.fan_tools)
            ],
        }
        return "/v1/messages/count_tokens", json.dumps(body).encode()
    elif kind == "fancalls":
        tools = [tool(f"fan_{i}", fan_schema(i), NONCE) for i in range(sizes.fan_calls)]
        body = chat_body(tag, tools)
    elif kind == "unique":
        rows = {"type": "array", "uniqueItems": True, "items": {"type": "object"}}
        schema = {"type": "object", "properties": {"rows": rows}, "required": ["rows"]}
        body = chat_body(tag, [tool("rows", schema, NONCE)])
    elif kind == "gzip":
        body = chat_body(tag, [])
    else:
        raise ValueError(f"no such kind: {kind}")
    return "/v1/chat/completions", json.dumps(body).encode()


def request(kind: str, sizes: Sizes) -> tuple[str, bytes]:
    """A hostile request of ``kind`` (one of :data:`SENT_ONCE`): its path and body, made
    distinct from every other by a fresh token."""
    path, template = _template(kind, sizes)
    fresh = "nonce-" + secrets.token_hex(8)
    return path, template.replace(NONCE.encode(), fresh.encode())
