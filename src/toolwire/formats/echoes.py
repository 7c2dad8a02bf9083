"""A family's own markup a model writes again where it means nothing: dropped, not shown.

- **A closer written again** right after a block of calls, only white space between: the
  block's last closing word twice (``</tool_call></tool_call>``, Gemma's
  ``<tool_call|><tool_call|>``), or a closing tag the grammar has none of for a bracketed
  marker (``[/TOOL_CALLS]`` after Mistral's ``[TOOL_CALLS]`` calls, as vLLM reads it). The
  words are computed from the family's forms, never listed (:func:`echo_words`); dropped,
  named ``recovered-echoed-markup``. Anywhere else they are the reply's text.
- **A tool's output the model writes itself**, in the framing its template gives a tool's
  result (DeepSeek's ``<｜tool▁output▁begin｜>…<｜tool▁output▁end｜>``, Qwen's
  ``<tool_response>…</tool_response>``; ``Syntax.tool_outputs``), anywhere in the reply: never
  shown and never believed, named ``ignored-tool-response``, as the reader for tools in words
  treats its ``<tool_response>``. Where its closer never comes, or a call's marker comes
  first, the opener was the reply's own words and stays text (the stream reads on), unless it
  came right after a block of calls: an output the engine cut short, dropped to the end.

Both are repairs of the reply's text: strict reading keeps it as written. Each body reads
its text once, so the work stays linear in the reply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .markerstream import DONE, FAILED, Body, MarkerStream
from .scan import markers

if TYPE_CHECKING:
    from .derived import DerivedShape

__all__ = ["Echo", "ToolOutput", "echo_words"]


def echo_words(shapes: tuple[DerivedShape, ...]) -> tuple[str, ...]:
    """The words that close each form's block (its trail's last, else its call's last), and
    for a marker in brackets (``[TOOL_CALLS]``) its closing tag (``[/TOOL_CALLS]``)."""
    words: list[str] = []
    for shape in shapes:
        last = shape.trail[-1:] or shape.post[-1:]
        # a tag or a special token: not a bracket, a comma, or Markdown's ``` fence
        words += [w for w in last if len(w.strip()) >= 3 and w.lstrip()[0] in "<["]
        marker = shape.marker
        if len(marker) > 2 and marker[0] == "[" and marker[-1] == "]" and marker[1] != "/":
            words.append(f"[/{marker[1:]}")
    return tuple(dict.fromkeys(words))


class Echo(Body):
    """A closer written again: one right after a block is dropped (see the module's doc);
    anywhere else it is the reply's text, given back with no notice."""

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        # decided where it opens (the reply may end right after it)
        if getattr(stream, "after_block", False):
            self.status = DONE
        else:
            self.status = FAILED
            self.reason = "a closer after text"

    def feed(self, s: str, i: int) -> int:
        return i

    def end_of_reply(self) -> None:
        pass  # (decided where it opened)


class ToolOutput(Body):
    """A tool's output the model writes itself, up to its closer. Where a call's marker
    comes first, or the reply ends before the closer, the opener was the reply's own words
    (``the template wraps results in <tool_response> tags``): given back, the stream reading
    on — unless it came right after a block of calls, where the engine cut a made-up output
    short: dropped to the reply's end."""

    def __init__(self, stream: MarkerStream, closer: str, stops: tuple[str, ...]) -> None:
        super().__init__(stream)
        self._closer = closer
        self._end = markers((closer, *stops))
        self._after_block = bool(getattr(stream, "after_block", False))

    def feed(self, s: str, i: int) -> int:
        j, end = self._end.scan(s, i)
        if not end:
            return j  # (a closer's start at the piece's end is held back)
        if end != self._closer:  # a call opens first: no output
            self.status = FAILED
            self.reason = "a tool output's opener in the reply's words"
            return j
        self.status = DONE
        return j + len(end)

    def end_of_reply(self) -> None:
        if self._after_block:
            self.status = DONE
        else:
            self.status = FAILED
            self.reason = "a tool output's opener in the reply's words"
