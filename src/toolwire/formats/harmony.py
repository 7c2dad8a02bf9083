"""OpenAI gpt-oss "harmony": a reply is a run of messages on channels, calls among them.

Hand-written, one of the named exceptions to families as declarations (:mod:`.syntax`): a reply
is a run of messages, each with a header naming its channel and its recipient, and a call is a
message addressed to a tool: no call framing a syntax value describes (its tagged dialect
inside ``<tool_call>``, ``tagged-harmony``, is one).

The generation prompt ends ``<|start|>assistant``; the model goes on with the rest of the
message's header and writes one message or several::

    <|channel|>analysis<|message|>thinking…<|end|>
    <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}
    <|call|><|start|>assistant<|channel|>final<|message|>the answer<|return|>

(written on several lines here: no newline separates them). A header holds a channel
(``<|channel|>analysis``), maybe a recipient (``to=functions.NAME``, written before the
channel too: the template renders a past call as
`` to=functions.NAME<|channel|>commentary json<|message|>``) and maybe a content type
(``json``, ``<|constrain|>json``). A message to ``functions.NAME`` is a call whose body is its
arguments, one JSON object, passed on as written. Otherwise ``analysis`` is reasoning and
``final`` or ``commentary`` (the preamble the user sees) is the reply's text; a message to
another recipient (a built-in tool such as ``python`` or ``browser.search``, which toolwire
does not run) stays reply text, with a notice. ``<|end|>``, ``<|call|>`` and ``<|return|>``
end a message (blanks between a call and its end token are skipped); a reply may also stop
inside one (the runtime drops the stop token). Text before any header is reply text.

It is read by the machine every grammar of that kind shares
(:class:`~toolwire.formats.channels.ChannelStream`): no header reaches the reply's text,
except inside a ``call-not-read`` notice's returned text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..messages import ToolCall
from .base import Family
from .channels import ChannelStream, Route, read_role, valid_name
from .grammar import CallForm, NamedJson, lit
from .jsonscan import ObjectScanner
from .markerstream import DONE, OPEN, WS, Body, MarkerStream

__all__ = ["GptOss"]

# --------------------------------------------------------------------------- gpt-oss

#: One piece of a header: a channel, a recipient, a constrained or a bare content type.
_PIECE = re.compile(
    r"\s*(?:<\|channel\|>([^\s<]+)|to=([^\s<]+)|<\|constrain\|>([^\s<]+)|([A-Za-z][\w.+-]*))"
)
_FUNCTIONS = "functions."


class _ArgumentsBody(Body):
    """A call's message: its arguments, one JSON object, passed on as written."""

    def __init__(self, stream: MarkerStream, name: str) -> None:
        super().__init__(stream)
        self.name = name
        self.index, self.id = self.announce(name)
        self.scanner = ObjectScanner()

    def step(self, s: str, i: int) -> tuple[int, bool]:
        if self.state == 0 and s[i] in WS:
            return i + 1, True
        self.state = 1
        i = self.feed_args(self.scanner, self.index, s, i)
        if self.status != OPEN or not self.scanner.done:
            return i, False
        text = self.scanner.text()
        args = self.json_args(text, i)
        if args is not None:
            self.calls.append((self.index, ToolCall(self.id, self.name, args, text.strip())))
            self.status = DONE
        return i, False


class HarmonyStream(ChannelStream):
    marker = "to=functions."
    opens = ("<|start|>", "<|channel|>")
    ends = ("<|end|>", "<|call|>", "<|return|>")
    header_end = "<|message|>"
    leading = (" to=",)

    def route(self, opener: str, header: str) -> Route:
        found = read_role(opener, header)
        if found is None:
            return Route("bad", note="not an assistant message")
        opener, text = found
        text = opener + text  # a <|channel|> opener is the header's first piece
        channel = recipient = ""
        pos = 0
        while pos < len(text) and not text[pos:].isspace():
            m = _PIECE.match(text, pos)
            if m is None:
                return Route("bad", note=f"unexpected {text[pos : pos + 20]!r}")
            channel = m.group(1) or channel
            recipient = m.group(2) or recipient
            pos = m.end()
        if recipient.startswith(_FUNCTIONS):
            name = recipient[len(_FUNCTIONS) :]
            if not valid_name(name):
                return Route("bad", note=f"a malformed tool name {name[:40]!r}")
            return Route("call", _ArgumentsBody(self, name))
        if recipient and recipient != "assistant":
            note = f"a message to {recipient}, which is not a declared function, stays text"
            return Route("text", note=note)
        return Route("reasoning" if channel == "analysis" else "text")


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return (
        "<|channel|>analysis<|message|>Writing it.<|end|><|start|>assistant<|channel|>"
        f"commentary to=functions.{name} <|constrain|>json<|message|>"
        + json.dumps(args)
        + "<|call|>"
    )


_GPT_OSS_FORM = CallForm(
    NamedJson(
        before=lit("to=functions."),
        between=f'(" "? {lit("<|channel|>")} "commentary")? " "? {lit("<|constrain|>")}? "json"? '
        f"{lit('<|message|>')}",
    ),
    sep=f'{lit("<|call|><|start|>assistant")} ({lit("<|channel|>commentary")} " "?)?',
    blocks=True,
    triggers=("to=functions.",),
    prefix=f'{lit("<|channel|>commentary")} " "?',
)


class GptOss(Family):
    name = "gpt-oss"
    label = "OpenAI harmony <|channel|>… to=functions.NAME <|message|>{JSON} (gpt-oss)"
    end_tokens = ("<|end|>", "<|return|>", "<|call|>")
    drops_tokens = True
    kept_tokens = ("<|message|>", "<|constrain|>", "<|call|>", "<|end|>")
    samples = (_sample,)
    markers = ("<|channel|>", "<|start|>")
    stream_class = HarmonyStream
    grammar = _GPT_OSS_FORM
    one_call_per_message = True
