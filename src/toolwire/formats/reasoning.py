"""Separating a model's thinking from its reply, as the reply streams.

A reply may open with a thinking block (``<think>…</think>``, Mistral's
``[THINK]…[/THINK]``), or the template's generation prompt may already have opened one, in
which case the reply starts inside it. Everything inside is reasoning: it is returned as
such and never read for calls. Only a block at the very start of the reply (after
whitespace) counts; ``<think>`` later in the text is ordinary text.
"""

from __future__ import annotations

from .scan import Markers

__all__ = ["CLOSERS", "OPENERS", "ReasoningSplitter", "opens_reasoning"]

OPENERS: dict[str, str] = {
    "<think>": "</think>",
    "[THINK]": "[/THINK]",
    "<seed:think>": "</seed:think>",
}
CLOSERS: tuple[str, ...] = tuple(OPENERS.values())

#: The closers to look for: either one, when the prompt opened the block; else its own.
_ANY_CLOSER = Markers(CLOSERS)
_CLOSER = {opener: Markers((closer,)) for opener, closer in OPENERS.items()}

_START, _REASONING, _AFTER, _CONTENT = range(4)


class ReasoningSplitter:
    """Splits a reply's chunks into ``(is_reasoning, text)`` pieces."""

    def __init__(self, *, opened: bool = False) -> None:
        self._state = _REASONING if opened else _START
        self._closers = _ANY_CLOSER
        self._lead: list[str] = []  # whitespace seen at the start, held until we know
        self._held = ""  # a partial opener (at the start) or closer (inside reasoning)

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
                opener = next((o for o in OPENERS if body.startswith(o)), None)
                if opener is not None:
                    self._state = _REASONING
                    self._closers = _CLOSER[opener]
                    self._lead.clear()
                    buf = body[len(opener) :]
                    continue
                if any(o.startswith(body) for o in OPENERS):
                    self._held = body
                    break
                self._state = _CONTENT
                out.append((False, "".join(self._lead) + body))
                self._lead.clear()
                break
            if self._state == _REASONING:
                found, closer = self._closers.scan(buf)
                if found:
                    out.append((True, buf[:found]))
                if not closer:
                    self._held = buf[found:]
                    break
                self._state = _AFTER
                buf = buf[found + len(closer) :]
                continue
            if self._state == _AFTER:
                body = buf.lstrip()
                if body:
                    self._state = _CONTENT
                    out.append((False, body))
                break
            out.append((False, buf))  # _CONTENT
            break
        return out

    def finish(self) -> list[tuple[bool, str]]:
        out: list[tuple[bool, str]] = []
        if self._state == _START:
            text = "".join(self._lead) + self._held
            if text:
                out.append((False, text))
        elif self._state == _REASONING and self._held:
            out.append((True, self._held))
        self._lead.clear()
        self._held = ""
        return out


def opens_reasoning(prompt: str) -> bool:
    """True when a rendered prompt ends inside an open thinking block.

    Some templates' generation prompt opens ``<think>`` for the model; its reply then starts
    inside the block, and must be read that way.
    """
    tail = prompt.rstrip()
    return any(tail.endswith(opener) for opener in OPENERS)
