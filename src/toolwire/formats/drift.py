"""Drift recovery: a call written in a shape the model's own grammar does not read.

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

A call written as bare JSON after a line of prose, as the reply's last block
(``Sure.\n{"name": N, "arguments": {...}}``), is recovered when it calls a declared tool with
arguments that fit its schema (:mod:`toolwire.formats.trailing`), named ``trailing-call``: the
prose streams on as it comes and stays content, only the candidate block is held back. JSON in
the middle of prose stays prose.

While the reply is held, the first call a family's reader opens still streams as it comes
(its start and arguments pass at once); only its end, or its withdrawal, waits. When the
reader withdraws it (an unclosed tag) and recovery reads the same call from the held text,
the call streamed is ended with the recovered arguments, under its own index and id; when
recovery reads another, the streamed one stays withdrawn.

A turn that offered no tools recovers nothing, but the same shapes, to any name, are still
call markup: :class:`ToollessWatch` lets the text through as it comes and names such a
reply at its end (``call-without-tools``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from .. import events as ev
from ..arguments.read import ReadError, read_json
from ..events import Event
from ..messages import ToolCall
from .base import IdMaker, ToolIndex, random_call_id
from .callshape import CallShape
from .jsoncall import raw_controls_message, read_call_json
from .trailing import TrailingBlock, fit_calls

__all__ = ["DriftGuard", "Recovery", "ToollessWatch", "recover", "recover_calls", "written_calls"]

_FENCE = re.compile(r"\A```(?:json|JSON)?[ \t]*\n(?P<body>.*?)\n?```\s*\Z", re.S)
_TAG = re.compile(r"\A<tool_call>\s*(?P<body>.*?)\s*(?:</tool_call>)?\s*\Z", re.S)
_MAX_CHARS = 256 * 1024
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
    if len(text) > _MAX_CHARS:
        return None
    body = text.strip()
    shape = "bare-json"
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


class DriftGuard:
    """Watches a reply's events: when the reply may be a drifted call, its text is held until
    the reply ends, then either recovered as calls or released as the text it was.

    Text passes at once whenever the reply cannot be a whole-reply call (it does not open
    with ``{``, ``[``, a ``json`` fence or ``<tool_call>``), and whenever a real call shows.
    Reasoning passes untouched and is never read.
    """

    def __init__(
        self,
        tools: Sequence[Mapping[str, Any]] | None,
        *,
        make_id: IdMaker | None = None,
        release_on_start: bool = False,
        answered: Callable[[str, str], bool] | None = None,
    ) -> None:
        self._tools = tools
        # is (name, arguments JSON) the call whose result ends the conversation?
        self._answered = answered
        self._make_id = make_id or random_call_id
        self._held: list[Event] = []
        self._texts: list[str] = []
        # the reply's opening, all that decides whether it may be a call (kept short, so
        # holding a long reply costs linear time)
        self._head = ""
        self._holding = ToolIndex.of(tools).known
        self._saw_call = False
        self._next = 0
        # a native call (an engine's own tool_calls) shows at its start; a family's call
        # may still turn out unread (an unclosed tag), so there only its end counts
        self._release_on = (ev.CallStart, ev.CallEnd) if release_on_start else (ev.CallEnd,)
        #: The reply opened as prose: its last block, which may be a call, held back.
        self._trail: TrailingBlock | None = None
        #: The family's call the held reply opened with, streamed as it came: (index, id,
        #: name); and whether the family withdrew it.
        self._opened: tuple[int, str, str] | None = None
        self._withdrawn = False

    def _trailing(self, events: Sequence[Event]) -> list[Event]:
        """Events after the reply showed prose: text passes but for the last block (which may
        be a call); anything else lets the held text go first. A real call ends the watch."""
        trail = self._trail
        out: list[Event] = []
        for event in events:
            if trail is None:
                out.append(event)
                continue
            if isinstance(event, ev.TextDelta):
                text = trail.feed(event.text)
                if text:
                    out.append(ev.TextDelta(text))
                continue
            if isinstance(event, ev.ReasoningDelta):
                out.append(event)
                continue
            held = trail.flush()
            if held:
                out.append(ev.TextDelta(held))
            if isinstance(event, (ev.CallStart, ev.CallArgsDelta, ev.CallEnd, ev.CallAbort)):
                self._next = max(self._next, event.index + 1)
            if isinstance(event, self._release_on):  # a real call: nothing to recover
                trail = self._trail = None
            out.append(event)
        return out

    def _end_trailing(self) -> list[Event]:
        trail, self._trail = self._trail, None
        if trail is None:
            return []
        text, block = trail.end()
        found = recover(block, self._tools) if block else None
        calls = [ToolCall("", name, args, raw) for name, args, raw in (found or ([], ""))[0]]
        events: list[Event] = [ev.TextDelta(text)] if text else []
        if found is None or not fit_calls(calls, ToolIndex.of(self._tools)):
            return events + ([ev.TextDelta(block)] if block else [])
        names = ", ".join(dict.fromkeys(call.name[:100] for call in calls))[:300]
        events.append(
            ev.Notice(
                "recovered-trailing-call",
                f"read the call to {names} the reply ends with, after its prose",
            )
        )
        events += found.notices()
        for call in calls:
            index = self._next
            self._next += 1
            cid = self._make_id(index)
            events += [
                ev.CallStart(index, cid, call.name),
                ev.CallArgsDelta(index, call.arguments_text),
                ev.CallEnd(index, ToolCall(cid, call.name, call.arguments, call.arguments_text)),
            ]
        return events

    def push(self, events: Sequence[Event]) -> list[Event]:
        if not self._holding:
            return self._trailing(events)
        out: list[Event] = []
        for position, event in enumerate(events):
            if isinstance(event, ev.ReasoningDelta):  # never read, never held
                out.append(event)
                continue
            if self._passes(event):  # the call the reply opens with, streamed as it comes
                if isinstance(event, ev.CallStart) and all(
                    isinstance(e, ev.TextDelta) and not e.text.strip() for e in self._held
                ):
                    out += self._held  # the white space before it
                    self._held = []
                out.append(event)
                continue
            if isinstance(event, self._release_on):  # a real call: nothing to recover
                self._saw_call = True
            if isinstance(event, ev.TextDelta):
                self._texts.append(event.text)
                if len(self._head) < _HEAD:
                    self._head = (self._head + event.text).lstrip()[:_HEAD]
            self._held.append(event)
            if self._saw_call or not _may_be_a_call(self._head):
                self._holding = False
                held, self._held = self._held, []
                if not self._saw_call:  # prose: its last block may still be a call
                    self._trail = TrailingBlock()
                return out + self._trailing([*held, *events[position + 1 :]])
        return out

    def _passes(self, event: Event) -> bool:
        """Does this event of a family's call pass while the reply is held?

        The first call a family's reader opens streams as it comes (its start, its
        arguments) although it may still come to nothing (an unclosed tag, which drift
        recovery may read at the end): its end, or its withdrawal, decides as before."""
        if isinstance(event, ev.CallStart) and self._opened is None and not self._saw_call:
            self._opened = (event.index, event.id, event.name)
            self._next = max(self._next, event.index + 1)
            return True
        opened = self._opened
        if opened is None or not isinstance(event, (ev.CallArgsDelta, ev.CallEnd, ev.CallAbort)):
            return False
        if event.index != opened[0] or self._withdrawn:
            return False
        if isinstance(event, ev.CallAbort):
            self._withdrawn = True
            return False  # held: recovery may yet read the call it began
        return isinstance(event, ev.CallArgsDelta)

    def end(self, *, cut: bool = False) -> list[Event]:
        """The reply is over: recovered calls, or the held text as it was.

        ``cut``: the engine stopped the reply at its token limit.
        """
        if not self._holding:
            return self._end_trailing()
        self._holding = False
        held, self._held = self._held, []
        found = (
            None
            if self._saw_call
            else recover("".join(self._texts), self._tools, cut=cut, repeats=True)
        )
        if found is None:
            opening = None if self._saw_call else _opening_call("".join(self._texts), self._tools)
            if opening is not None and self._answered and self._answered(opening[0], opening[2]):
                # the call just answered, written again and run on (often with its result
                # echoed after it): a repeat, whatever follows; the repeat check takes it
                found = Recovery([opening], "opening-call")
            elif opening is not None:  # raw call markup is never shown silently
                held.append(
                    ev.Notice(
                        "call-not-read",
                        f"the reply opens with a call to {opening[0]} but goes on after it; "
                        "it stays text and nothing was run",
                    )
                )
                return held
            else:
                return held
        calls, shape, _ = found
        # what the family made of the drifted text (text, or a call it started and gave up)
        # gives way to the calls recovered from it
        dropped = (ev.TextDelta, ev.CallStart, ev.CallArgsDelta, ev.CallAbort)
        events: list[Event] = [
            e
            for e in held
            if not isinstance(e, dropped)
            and not (isinstance(e, ev.Notice) and e.code == "call-not-read")
        ]
        why = (
            "the call the reply opens with, the same as the one just answered; what followed "
            "it was dropped"
            if shape == "opening-call"
            else f"a call the model wrote as {shape}"
        )
        events.append(ev.Notice(ev.recovered(shape), f"read {why}"))
        events += found.notices()
        opened, self._opened = self._opened, None
        if opened is not None and calls[0][0] == opened[2]:
            # the call streamed as it came is the one recovered: it ends here
            name, arguments, raw = calls.pop(0)
            events.append(ev.CallEnd(opened[0], ToolCall(opened[1], name, arguments, raw)))
        elif opened is not None:
            events.insert(0, ev.CallAbort(opened[0], opened[1], "another call was read"))
        for name, arguments, raw in calls:
            index = self._next
            self._next += 1
            cid = self._make_id(index)
            events += [
                ev.CallStart(index, cid, name),
                ev.CallArgsDelta(index, raw),
                ev.CallEnd(index, ToolCall(cid, name, arguments, raw)),
            ]
        return events


class ToollessWatch:
    """Watches the text of a turn that offered no tools: a reply that is, as a whole, a call
    (in any shape :func:`recover_calls` reads, to any name) stays text — nothing is a call,
    nothing runs — and :meth:`end` names it in a ``call-without-tools`` notice, so raw call
    markup is never shown silently.

    Nothing is held back: every event passes at once, and the notice comes at the reply's
    end. The text is kept only while the reply may still be a call (its opening decides) and
    within the recovery's size bound, so the work stays linear. Reasoning is never read.
    """

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._size = 0
        self._head = ""
        self._watching = True

    def push(self, events: Sequence[Event]) -> list[Event]:
        """The events, all passed on; their text noted while the reply may be a call."""
        for event in events:
            if not self._watching or not isinstance(event, ev.TextDelta):
                continue
            self._texts.append(event.text)
            self._size += len(event.text)
            if len(self._head) < _HEAD:
                self._head = (self._head + event.text).lstrip()[:_HEAD]
            if self._size > _MAX_CHARS or not _may_be_a_call(self._head):
                self._watching = False
                self._texts = []
        return list(events)

    def end(self, *, cut: bool = False) -> list[Event]:
        """The reply is over: a ``call-without-tools`` notice when it was a call, else none.

        ``cut``: the engine stopped the reply at its token limit."""
        if not self._watching:
            return []
        self._watching = False
        text, self._texts = "".join(self._texts), []
        found = written_calls(text, cut=cut) if text.strip() else None
        if found is None:
            return []
        names, shape = found
        called = ", ".join(dict.fromkeys(name[:100] for name in names))[:300]
        return [
            ev.Notice(
                "call-without-tools",
                f"the reply is a call to {called} (written as {shape}), but this turn offered "
                "no tools; it stays text and nothing was run",
            )
        ]


def _opening_call(
    text: str, tools: Sequence[Mapping[str, Any]] | None
) -> tuple[str, dict[str, Any], str] | None:
    """The call a reply's first JSON object makes to a declared tool (bare, fenced or in
    doubled braces) when the reply goes on after it, so it was not recovered:
    ``(name, arguments, arguments JSON)``; else None. One decode of the opening: linear."""
    body = text.strip()
    m = re.match(r"```(?:json|JSON)?[ \t]*\n", body)
    if m:
        body = body[m.end() :]
    if not body.startswith("{") or len(body) > _MAX_CHARS:
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


_OPENINGS = ("{", "[", "```json", "```JSON", "```\n", "<tool_call>")


_HEAD = 12


def _may_be_a_call(text: str) -> bool:
    """Could a reply that starts like this still be nothing but a call?"""
    head = text.lstrip()[:_HEAD]
    if not head:
        return True
    return any(o.startswith(head) or head.startswith(o) for o in _OPENINGS)
