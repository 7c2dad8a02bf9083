"""Drift recovery: a call written in a shape the model's own grammar does not read, read back.

Small models drift. Qwen2.5-Coder-0.5B, whose template asks for Hermes tags, answers with
the bare call JSON or the same in a ```json fence; a strict Hermes parser reads no call and
shows the JSON to the user. When a family's strict parse finds no call, the reply is read
once more, narrowly: only a reply that is nothing but the call (or a list of calls), only
for declared tools, and never from reasoning. A recovery is recorded by name on the result
(a :class:`~toolwire.events.Notice`), and the ``strict`` setting turns it off.

Shapes recovered, the whole reply being:

``bare-json``       ``{"name": N, "arguments": {...}}`` (or ``"parameters"``), or a list of them
``fenced-json``     the same inside a ````json`` or plain ```` fence
``unclosed-tag``    ``<tool_call>`` and the JSON, the closing tag never written
``tagged``          ``<tool_call>`` and the JSON, closed, from an engine that reads no tags
                    (or several such blocks, one call each: a model's parallel calls)
``json-lines``      several call objects one after another (a small model's parallel calls)
``doubled-braces``  the call in doubled braces, ``{{"name": N, "arguments": {...}}}``, bare or
                    in a fence: the shape some templates' own instructions show (Qwen2.5-Coder
                    1.5B's writes ``{{"name": …}}``), so the model was taught it by its prompt

A call's JSON is read as every family reads a call's JSON (:func:`~toolwire.formats.jsoncall.
read_call_json`, the one decision): a raw line break, carriage return or tab inside its
strings (a model writing code into an argument) is read as its escape and named in a
``recovered-raw-controls`` notice, in whichever of these shapes it is written (strict turns
drift recovery off, and the tolerance with it).

When the engine cut the reply at its token limit, the complete calls before the cut are
recovered and the unfinished one after them is dropped (the notice names the shape
``json-lines-cut``).

The same call written more than once in one reply is recovered once: small models repeat a
call until the token limit, and a client would otherwise run the tool that many times. (The
reply pipeline's guard keeps the repeats, so its repeat check drops and names them.)

The guard that holds a reply while it may be such a call, and releases or recovers it, is
:mod:`.drift`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from .. import events as ev
from ..arguments.read import ReadError, read_json
from ..events import Event
from .base import ToolIndex
from .callshape import CallShape
from .jsoncall import raw_controls_message, read_call_json

__all__ = ["MAX_CHARS", "Recovery", "opening_call", "recover", "recover_calls", "written_calls"]

_FENCE = re.compile(r"\A```(?:json|JSON)?[ \t]*\n(?P<body>.*?)\n?```\s*\Z", re.S)
_TAG = re.compile(r"\A<tool_call>\s*(?P<body>.*?)\s*(?:</tool_call>)?\s*\Z", re.S)
MAX_CHARS = 256 * 1024
#: A recovered call: ``name`` and ``arguments`` (or ``parameters``), perhaps
#: ``"type": "function"``, naming a declared tool; nothing else.
_SHAPE = CallShape(("arguments", "parameters"), constants={"type": "function"}, declared_only=True)
#: The same shape whatever the name: a call written when no tools were offered.
_ANY_NAME = CallShape(("arguments", "parameters"), constants={"type": "function"})


class Recovery(NamedTuple):
    """The calls a whole reply drifted into (``(name, arguments, text)`` each), its shape,
    and whether its JSON strings held raw line breaks or tabs (``recovered-raw-controls``)."""

    calls: list[tuple[str, dict[str, Any], str]]
    shape: str
    raw_controls: bool = False

    def notices(self) -> list[Event]:
        """The tolerances met besides the shape: the raw controls, named."""
        if not self.raw_controls:
            return []
        names = ", ".join(dict.fromkeys(name[:100] for name, _, _ in self.calls))[:300]
        return [ev.Notice("recovered-raw-controls", raw_controls_message(names))]


def recover_calls(
    text: str,
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    lenient: bool = False,
    cut: bool = False,
    repeats: bool = False,
) -> tuple[list[tuple[str, dict[str, Any], str]], str] | None:
    """The calls a whole reply drifted into: ``([(name, arguments, text)], shape)`` or None
    (:func:`recover`, without saying whether raw controls were read).

    ``arguments`` is the JSON object as the model wrote it (untyped), ``text`` its JSON.

    ``None`` unless the reply is nothing but calls to declared tools. ``lenient`` reads the
    JSON as almost-JSON (for tools in words, where the model was only asked in prose).
    ``cut`` says the engine stopped the reply at its token limit: complete calls followed by
    the start of another are then read as ``json-lines-cut``. ``repeats`` keeps a call
    written again (for the reply pipeline's repeat check, which names it); else it is
    read once.
    """
    found = recover(text, tools, lenient=lenient, cut=cut, repeats=repeats)
    return None if found is None else (found.calls, found.shape)


def recover(
    text: str,
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    lenient: bool = False,
    cut: bool = False,
    repeats: bool = False,
) -> Recovery | None:
    """The calls a whole reply drifted into, as :func:`recover_calls` reads them, with the
    tolerances met on the way (:class:`Recovery`)."""
    index = ToolIndex.of(tools)
    if not index.known:
        return None
    return _recover(text, index, _SHAPE, lenient=lenient, cut=cut, repeats=repeats)


def written_calls(text: str, *, cut: bool = False) -> tuple[list[str], str] | None:
    """The names a whole reply calls, in any shape :func:`recover_calls` reads, whatever the
    names: ``([name, ...], shape)`` or None.

    For a turn that offered no tools, where nothing is a call: such a reply stays text, and
    this only says that it is call markup (so it is never shown silently). Prose that
    mentions JSON is not: the reply must be nothing but calls. Read strictly, as drift
    recovery reads a model's own tools; bounded and linear like it.
    """
    found = _recover(text, ToolIndex(()), _ANY_NAME, lenient=False, cut=cut, repeats=False)
    return None if found is None else ([name for name, _, _ in found.calls], found.shape)


def _recover(
    text: str,
    index: ToolIndex,
    call: CallShape,
    *,
    lenient: bool,
    cut: bool,
    repeats: bool,
) -> Recovery | None:
    if len(text) > MAX_CHARS:
        return None
    body = text.strip()
    shape = "bare-json"
    blocks = _tag_blocks(body)
    if blocks is not None:
        return _blocks(blocks, index, lenient=lenient, repeats=repeats, call=call)
    for pattern, name in ((_FENCE, "fenced-json"), (_TAG, "unclosed-tag")):
        m = pattern.match(body)
        if m:
            if name == "unclosed-tag" and body.endswith("</tool_call>"):
                name = "tagged"  # closed, where the engine's grammar reads no tags
            body, shape = m.group("body").strip(), name
            break
    if not body.startswith(("{", "[")):
        return None
    if body.startswith("{{") and body.endswith("}}"):
        inner = _calls_in(body[1:-1], index, lenient=lenient, cut=cut, repeats=repeats, call=call)
        if inner is not None:
            return inner._replace(shape="doubled-braces")
    found = _calls_in(body, index, lenient=lenient, cut=cut, repeats=repeats, call=call)
    if found is None:
        return None
    return found if found.shape != "json" else found._replace(shape=shape)


_OPEN, _CLOSE = "<tool_call>", "</tool_call>"


def _tag_blocks(body: str) -> list[str] | None:
    """The bodies of a reply that is nothing but two or more closed ``<tool_call>`` blocks
    (whitespace between them), or None; one pass over the text."""
    if body.count(_OPEN) < 2:
        return None
    bodies = []
    at = 0
    while at < len(body):
        if not body.startswith(_OPEN, at):
            return None
        end = body.find(_CLOSE, at + len(_OPEN))
        if end < 0 or _OPEN in body[at + len(_OPEN) : end]:
            return None
        bodies.append(body[at + len(_OPEN) : end].strip())
        at = end + len(_CLOSE)
        while at < len(body) and body[at].isspace():
            at += 1
    return bodies


def _blocks(
    blocks: Sequence[str], index: ToolIndex, *, lenient: bool, repeats: bool, call: CallShape
) -> Recovery | None:
    """Several closed blocks, each read on its own: each must be one whole call (never a
    cut one: a closed block was finished), or none of them is a call."""
    calls: list[tuple[str, dict[str, Any], str]] = []
    seen: set[tuple[str, str]] = set()
    raw_controls = False
    for block in blocks:
        if not block.startswith("{"):
            return None
        found = _calls_in(block, index, lenient=lenient, cut=False, repeats=True, call=call)
        if found is None or found.shape != "json" or len(found.calls) != 1:
            return None
        name, args, raw = found.calls[0]
        raw_controls = raw_controls or found.raw_controls
        if (name, raw) in seen and not repeats:
            continue  # the same call again
        seen.add((name, raw))
        calls.append((name, args, raw))
    return Recovery(calls, "tagged", raw_controls)


def _calls_in(
    body: str,
    index: ToolIndex,
    *,
    lenient: bool,
    cut: bool,
    repeats: bool = False,
    call: CallShape = _SHAPE,
) -> Recovery | None:
    """The calls ``body`` holds (a call, a list, or JSON lines) and ``json`` or the lines'
    shape; None unless every value is a call to a declared tool."""
    shape = "json"
    # several calls one after another first: the lenient reader would keep only the first
    lines = _json_values(body, cut=cut)
    if lines is not None:
        value, shape, raw_controls = lines
    else:
        read = _read(body, lenient=lenient)
        if read is None:
            return None
        value, raw_controls = read
    items = value if isinstance(value, list) else [value]
    calls: list[tuple[str, dict[str, Any], str]] = []
    seen: set[tuple[str, str]] = set()
    for item in items:
        found = call.read(item, index)
        if isinstance(found, str):
            return None
        name, args = found
        raw = json.dumps(args, ensure_ascii=False)
        if (name, raw) in seen and not repeats:
            continue  # the same call again
        seen.add((name, raw))
        calls.append((name, args, raw))
    return Recovery(calls, shape, raw_controls) if calls else None


def _read(body: str, *, lenient: bool) -> tuple[Any, bool] | None:
    """``body``'s one JSON value, and whether raw controls in its strings were read: strict
    JSON, or a call's JSON as every reader of calls takes it (:func:`read_call_json`), or
    with ``lenient`` almost-JSON; None when it is none of these."""
    try:
        return read_json(body, strict=True).value, False
    except ReadError:
        pass
    try:
        value, raw = read_call_json(body)
    except (ValueError, RecursionError):
        pass
    else:
        if raw:  # the strict read refused it for its raw controls alone
            return value, True
    if not lenient:
        return None
    try:
        result = read_json(body)
    except ReadError:
        return None
    return result.value, "control-characters" in result.repairs


#: At most this many calls are read from one reply written as JSON lines.
_MAX_LINES = 64


def _json_values(body: str, *, cut: bool = False) -> tuple[list[Any], str, bool] | None:
    """Several JSON objects one after another, apart only by white space; else None. With
    them, whether raw controls in their strings were read (as :func:`_read` reads one).

    Each value is found once, then read as a single call is, and the first that fails ends
    the search, so the work is linear in the text. With ``cut``, an unfinished object after
    complete ones ends the reply (the engine stopped it there).
    """
    decoder = _FINDER
    values: list[Any] = []
    raw_controls = False
    at = 0
    while at < len(body):
        if len(values) == _MAX_LINES or body[at] != "{":
            return None
        read = None
        try:
            _, end = decoder.raw_decode(body, at)
            # each value as a single call is read: no NaN, within the reader's limits
            read = _read(body[at:end], lenient=False)
        except (ValueError, RecursionError):
            pass
        if read is None:
            if cut and values and _unfinished(body[at:]):
                return values, "json-lines-cut", raw_controls
            return None
        value, raw = read
        raw_controls = raw_controls or raw
        at = end
        values.append(value)
        while at < len(body) and body[at] in " \t\r\n":
            at += 1
    return (values, "json-lines", raw_controls) if len(values) > 1 else None


#: Finds where each of several JSON values ends, raw controls in strings and all (each value
#: is then read as a call is: :func:`_read`).
_FINDER = json.JSONDecoder(strict=False)


def _unfinished(tail: str) -> bool:
    """Is ``tail`` the start of a JSON object that the text ran out on?

    It is when the lenient reader needs only to close it at its end (open strings and
    brackets), or stops because it ends inside a key or before a value. (``tail`` never
    reads strictly here: the strict search has just failed on it.)
    """
    try:
        result = read_json(tail)
    except ReadError as exc:
        return exc.what.startswith("the arguments end ")
    repairs = set(result.repairs)
    return isinstance(result.value, dict) and bool(repairs) and repairs <= _CLOSING


#: The lenient reader's repairs that only finish a text cut short.
_CLOSING = {"unclosed-string", "unclosed-brackets"}


def opening_call(
    text: str, tools: Sequence[Mapping[str, Any]] | None
) -> tuple[str, dict[str, Any], str] | None:
    """The call a reply's first JSON object makes to a declared tool (bare, fenced or in
    doubled braces) when the reply goes on after it, so it was not recovered:
    ``(name, arguments, arguments JSON)``; else None. One decode of the opening: linear."""
    body = text.strip()
    m = re.match(r"```(?:json|JSON)?[ \t]*\n", body)
    if m:
        body = body[m.end() :]
    if not body.startswith("{") or len(body) > MAX_CHARS:
        return None
    index = ToolIndex.of(tools)
    for at in (1, 0) if body.startswith("{{") else (0,):
        try:
            obj, _ = json.JSONDecoder().raw_decode(body, at)
        except (ValueError, RecursionError):
            continue
        found = _SHAPE.read(obj, index)
        if isinstance(found, tuple):
            name, args = found
            return name, args, json.dumps(args, ensure_ascii=False)
    return None
