"""Separating a model's thinking from its reply, as the reply streams.

A reply may open with a thinking block (``<think>…</think>``, Mistral's
``[THINK]…[/THINK]``, Cohere's ``<|START_THINKING|>…<|END_THINKING|>``), or the template's
generation prompt may already have opened one, in which case the reply starts inside it.
Everything inside is reasoning: it is returned as such and never read for calls. Only a
block at the very start of the reply (after whitespace) counts; ``<think>`` later in the text
is ordinary text.

Where the generation prompt opened the block, a model may write the opener again at the
reply's start (Qwen3.5, Nemotron 3, Laguna): it is the template's own token, dropped, as
Ollama's parsers drop it.

Two things end a block besides its closer:

- a family's call marker at the start of a line inside a block the generation prompt opened,
  when the reader is given ``call_markers`` (Qwen3.5 with thinking open writes
  ``<tool_call>`` before any ``</think>``: the model never wrote the opener). The call ends
  the thinking and is a call; ``ended_by_call`` then says so, and the reply stream names that
  repair in a notice. A strict reader passes no markers, and the call stays reasoning. In a
  block the model opened itself, a call stays reasoning: models think about calls there
  (Ministral writes ``[TOOL_CALLS]`` inside ``[THINK]…[/THINK]`` and then calls after it);
- nothing else: a closer missing at the end of the reply leaves everything reasoning.

Cohere's models wrap their answer in ``<|START_RESPONSE|>…<|END_RESPONSE|>`` (Command R7B) or
``<|START_TEXT|>…<|END_TEXT|>`` (Cohere2), Hunyuan A13B in ``<answer>…</answer>``: those
markers, where the answer starts, are the grammar's and never part of the text.

This module is the mechanism; the tags are the families' (each declares its own
:class:`ReasoningTags` as ``Family.reasoning``). The registry gathers them and installs the
union here when the package is imported (:func:`install`), so a splitter, and
:func:`opens_reasoning`, recognise every family's tags unless given others; the union is
also readable under the names the tables had as constants (``OPENERS``, ``CLOSERS``,
``PROMPT_OPENERS``, ``ANSWERS``, ``CHANNEL_OPENERS``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .scan import Markers, markers

__all__ = [
    "PENDING_CHARS",
    "THINK",
    "ReasoningSplitter",
    "ReasoningTags",
    "install",
    "known_tags",
    "opens_reasoning",
]


@dataclass(frozen=True, eq=False)
class ReasoningTags:
    """The thinking and answer tags one family's models write: part of its declaration
    (``Family.reasoning``), or the union of every family's (:func:`known_tags`).

    Each mapping goes from an opener to what closes it, in the order written.
    """

    #: Blocks the model opens itself at the start of its reply (``<think>…</think>``).
    blocks: Mapping[str, str] = field(default_factory=dict)
    #: Blocks only a generation prompt opens (plain words: a reply starting so is no thinking).
    prompt_blocks: Mapping[str, str] = field(default_factory=dict)
    #: Markers around the answer where it starts (after any thinking), dropped from the text.
    answers: Mapping[str, str] = field(default_factory=dict)
    #: A thinking closer that also opens the answer, and the marker that ends it.
    answer_after: Mapping[str, str] = field(default_factory=dict)
    #: Prompt endings that open a thinking channel the family's own grammar reads: the reply
    #: starts in it, but no splitter reads it.
    channel_openers: tuple[str, ...] = ()

    def __or__(self, other: ReasoningTags) -> ReasoningTags:
        """Both families' tags, this one's first (a tag both declare is kept once)."""
        return ReasoningTags(
            {**self.blocks, **other.blocks},
            {**self.prompt_blocks, **other.prompt_blocks},
            {**self.answers, **other.answers},
            {**self.answer_after, **other.answer_after},
            tuple(dict.fromkeys((*self.channel_openers, *other.channel_openers))),
        )

    def __bool__(self) -> bool:
        return bool(self.blocks or self.prompt_blocks or self.answers or self.channel_openers)

    @property
    def closers(self) -> tuple[str, ...]:
        """Every closer of a thinking block, the model's or the prompt's."""
        return tuple(dict.fromkeys((*self.blocks.values(), *self.prompt_blocks.values())))

    @property
    def openers(self) -> tuple[str, ...]:
        """Every text that opens thinking: the model's blocks, the prompt's, the channels'."""
        return (*self.blocks, *self.prompt_blocks, *self.channel_openers)

    def describe(self) -> list[str]:
        """Each tag pair in words, for ``toolwire families``."""
        return [
            *(f"{o}…{c}" for o, c in self.blocks.items()),
            *(f"{o}…{c} (prompt)" for o, c in self.prompt_blocks.items()),
            *(f"answer {o}…{c}" for o, c in self.answers.items()),
            *(f"{o}… (its grammar)" for o in self.channel_openers),
        ]

    @functools.cached_property
    def _tables(self) -> _Tables:
        return _Tables(self)


#: The block most families' models think in.
THINK = ReasoningTags(blocks={"<think>": "</think>"})


class _Tables:
    """What a splitter looks up, built once per set of tags."""

    def __init__(self, tags: ReasoningTags) -> None:
        self.openers = tuple(tags.blocks)
        self.answers = tuple(tags.answers)
        #: The closers to look for: either one, when the prompt opened the block; else its own.
        self.any_closer = tags.closers
        self.closer = {opener: (closer,) for opener, closer in tags.blocks.items()}
        self.answer_after = dict(tags.answer_after)
        self.answer_closer = {
            opener: Markers((closer,))
            for opener, closer in (*tags.answers.items(), *tags.answer_after.items())
        }
        self.starts = (*tags.blocks, *tags.answers, *self.any_closer)


#: The tags every splitter recognises unless given others: every registered family's, which
#: the registry gathers from their declarations and installs when the package is imported
#: (formats/__init__.py imports it, so no stream is made before).
_known = ReasoningTags()


def known_tags() -> ReasoningTags:
    """Every registered family's tags together: every stream recognises all of them (a
    model's thinking is split off whichever family reads its calls)."""
    return _known


def install(tags: ReasoningTags) -> None:
    """Make ``tags`` the ones recognised by default (the registry's union)."""
    global _known
    _known = tags


def __getattr__(name: str) -> Any:
    """The union tables under the names they had as constants, gathered from the families'
    declarations when first asked: ``OPENERS`` (blocks), ``PROMPT_OPENERS``, ``CLOSERS``,
    ``ANSWERS``, ``CHANNEL_OPENERS``."""
    tags = known_tags()
    tables: dict[str, Any] = {
        "OPENERS": dict(tags.blocks),
        "PROMPT_OPENERS": dict(tags.prompt_blocks),
        "CLOSERS": tags.closers,
        "ANSWERS": dict(tags.answers),
        "CHANNEL_OPENERS": tags.channel_openers,
    }
    if name in tables:
        return tables[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_START, _REASONING, _AFTER, _CONTENT, _ANSWER, _PENDING = range(6)

#: How much thinking after a call marker is held back, waiting to see whether the block
#: closes (it was thinking) or the reply ends in it (a call): past this, it was thinking, and
#: it streams on (a reply that thinks about the calls it will make is not held to its end).
PENDING_CHARS = 16_384


class ReasoningSplitter:
    """Splits a reply's chunks into ``(is_reasoning, text)`` pieces."""

    def __init__(
        self,
        *,
        opened: bool = False,
        call_markers: tuple[str, ...] = (),
        tags: ReasoningTags | None = None,
    ) -> None:
        #: The tags recognised: by default every registered family's.
        self._t = (tags or known_tags())._tables
        self._calls = tuple(m for m in call_markers if m)
        self._state = _START
        #: The reply is past its thinking for good: every chunk from here is the answer's.
        self.passing = False
        self._lead: list[str] = []  # whitespace seen at the start, held until we know
        self._held = ""  # a partial opener (at the start) or closer (inside reasoning)
        self._closers = markers(self._t.any_closer)
        self._line_start = False
        self._line_calls: tuple[str, ...] = ()
        self._answer_end: Markers | None = None
        #: True once a call marker at a line's start ended the thinking block.
        self.ended_by_call = False
        #: A call marker inside a line of thinking, and what followed it: thinking if the
        #: block closes after it, else (the reply ended in the block) a call (see finish).
        self._pending: list[str] = []
        self._pending_size = 0
        self._block_closers = self._closers
        #: What :meth:`finish` found of a call written in a block that never closed.
        self.unclosed_call = ""
        #: The prompt opened the block and nothing of it came yet: the model may write the
        #: opener again (see _reopened).
        self._reopen = opened
        if opened:
            self._enter(self._t.any_closer, self._calls)

    @property
    def deciding(self) -> bool:
        """True while the reply's start may still open a thinking block."""
        return self._state == _START

    @property
    def thinking(self) -> bool:
        """True while the reply is inside a thinking block."""
        return self._state == _REASONING

    def _enter(
        self, closers: tuple[str, ...], calls: tuple[str, ...] = (), lines: bool = True
    ) -> None:
        """The reply is now inside a thinking block that ``closers`` end, or (with
        ``lines``: a block the prompt opened) a line that starts with one of ``calls``; one
        of ``calls`` inside it is held (see :meth:`_pending_call`)."""
        self._state = _REASONING
        self._line_start = lines and bool(calls)
        self._line_calls = calls
        self._block_closers = markers(closers)
        starts = tuple("\n" + m for m in calls) if lines else ()
        self._closers = markers(closers + starts + calls)

    def _content_start(self, body: str, lead: str, out: list[tuple[bool, str]]) -> str:
        """The answer starts at ``body`` (not empty, no leading whitespace): the text left to
        read, or ``""`` with ``body`` held when it may still become an answer marker."""
        opener = next((o for o in self._t.answers if body.startswith(o)), None)
        if opener is not None:
            self._state = _ANSWER
            self._answer_end = self._t.answer_closer[opener]
            return body[len(opener) :]
        if any(o.startswith(body) for o in self._t.starts):
            self._held = body
            return ""
        self._state = _CONTENT
        self.passing = True
        out.append((False, lead + body))
        return ""

    def feed(self, text: str) -> list[tuple[bool, str]]:
        out: list[tuple[bool, str]] = []
        if self._state == _CONTENT:
            out.append((False, text))
            return out
        buf = self._held + text
        self._held = ""
        while buf:
            if self._state == _START:
                body = buf.lstrip()
                if not body:
                    self._lead.append(buf)
                    break
                self._lead.append(buf[: len(buf) - len(body)])
                opener = next((o for o in self._t.openers if body.startswith(o)), None)
                if opener is not None:
                    self._enter(self._t.closer[opener], self._calls, lines=False)
                    self._lead.clear()
                    buf = body[len(opener) :]
                    continue
                stray = next((c for c in self._t.any_closer if body.startswith(c)), None)
                if stray is not None:
                    # the reply opens by closing a thinking block: the prompt opened it and
                    # the model thought nothing (or the caller did not say the prompt opens
                    # one); the closer is the template's own token, not the answer's
                    self._state = _AFTER
                    self._lead.clear()
                    buf = body[len(stray) :]
                    continue
                lead = "".join(self._lead)
                buf = self._content_start(body, lead, out)
                if self._state != _START or not self._held:
                    self._lead.clear()
                continue
            if self._state == _REASONING:
                buf = self._reasoning(buf, out)
                continue
            if self._state == _PENDING:
                buf = self._pending_call(buf, out)
                continue
            if self._state == _AFTER:
                body = buf.lstrip()
                if body and self._answer_end is not None:  # the closer opened the answer
                    self._state = _ANSWER
                    buf = body
                    continue
                buf = self._content_start(body, "", out) if body else ""
                continue
            if self._state == _ANSWER:
                assert self._answer_end is not None
                found, closer = self._answer_end.scan(buf)
                if found:
                    out.append((False, buf[:found]))
                if not closer:
                    self._held = buf[found:]
                    break
                self._state = _CONTENT
                self.passing = True
                buf = buf[found + len(closer) :]
                continue
            out.append((False, buf))  # _CONTENT
            break
        return out

    def _reopened(self, buf: str) -> str | None:
        """The block the prompt opened, its start: a model that writes the opener again
        (``<think>`` after a prompt that ends in it, as Qwen3.5, Nemotron 3 and Laguna do)
        has it dropped, as the template's own token, with the white space before it. The
        text to read on, or None while it may still be the opener (held)."""
        body = buf.lstrip()
        if not body:
            return None if len(buf) <= PENDING_CHARS else buf
        opener = next((o for o in self._t.openers if body.startswith(o)), None)
        if opener is not None:
            self._reopen = False
            return body[len(opener) :]
        if any(o.startswith(body) for o in self._t.openers):
            return None
        self._reopen = False
        return buf

    def _reasoning(self, buf: str, out: list[tuple[bool, str]]) -> str:
        """Read thinking from ``buf``: what is left once the block ends, else ``""``."""
        if self._reopen:
            rest = self._reopened(buf)
            if rest is None:
                self._held = buf
                return ""
            buf = rest
            if not buf:
                return ""
        if self._line_start:  # a call marker at the block's very start
            if any(buf.startswith(m) for m in self._line_calls):
                return self._call_ends(buf, 0, out)
            if any(m.startswith(buf) for m in self._line_calls):
                self._held = buf
                return ""
            self._line_start = False
        found, closer = self._closers.scan(buf)
        if found:
            out.append((True, buf[:found]))
        if not closer:
            self._held = buf[found:]
            return ""
        if closer.startswith("\n"):  # a call marker at a line's start
            return self._call_ends(buf, found + 1, out)
        if closer in self._line_calls:  # a call marker inside a line: wait and see
            self._state = _PENDING
            self._pending, self._pending_size = [closer], len(closer)
            return buf[found + len(closer) :]
        return self._closed(buf, found, closer)

    def _closed(self, buf: str, found: int, closer: str) -> str:
        """The block ends with ``closer`` at ``buf[found]``: what follows it."""
        if closer in self._t.answer_after:
            self._answer_end = self._t.answer_closer[closer]
        self._state = _AFTER
        return buf[found + len(closer) :]

    def _pending_call(self, buf: str, out: list[tuple[bool, str]]) -> str:
        """After a call marker inside a line of thinking: held until the block closes (all
        of it was thinking: a model may think about the calls it will make) or the reply
        ends inside the block (:meth:`finish`: it was a call)."""
        found, closer = self._block_closers.scan(buf)
        self._pending.append(buf[:found])
        self._pending_size += found
        if not closer:
            self._held = buf[found:]
            if self._pending_size > PENDING_CHARS:
                # thinking went on long after the marker: it was thinking, streamed now
                out.append((True, "".join(self._pending)))
                self._pending, self._pending_size = [], 0
                self._state = _REASONING
            return ""
        out.append((True, "".join(self._pending)))
        self._pending, self._pending_size = [], 0
        return self._closed(buf, found, closer)

    def _call_ends(self, buf: str, at: int, out: list[tuple[bool, str]]) -> str:
        """A call at ``buf[at]`` ends the thinking: the rest is the answer, call first."""
        self.ended_by_call = True
        self._state = _CONTENT
        self.passing = True
        out.append((False, buf[at:]))
        return ""

    def finish(self) -> list[tuple[bool, str]]:
        out: list[tuple[bool, str]] = []
        if self._state == _START:
            text = "".join(self._lead) + self._held
            if text:
                out.append((False, text))
        elif self._state == _REASONING and self._held:
            out.append((True, self._held))
        elif self._state == _PENDING:
            # the reply ended in the thinking block, a call marker in it: a model that
            # calls a tool before it closes its thinking (the prompt opened it, or the
            # model never closed it). From the marker on, the family reads it: its calls
            # are calls, the rest thinking (see ReplyStream.finish)
            self.unclosed_call = "".join(self._pending) + self._held
            self._pending = []
        elif self._state in (_AFTER, _ANSWER) and self._held:
            out.append((False, self._held))
        self._lead.clear()
        self._held = ""
        return out


def opens_reasoning(prompt: str) -> bool:
    """True when a rendered prompt ends inside an open thinking block.

    Some templates' generation prompt opens ``<think>`` for the model; its reply then starts
    inside the block, and must be read that way.
    """
    tail = prompt.rstrip()
    return any(tail.endswith(opener) for opener in known_tags().openers)
