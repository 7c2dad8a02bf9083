"""Muse Glimmer "ATEM": messages addressed to a recipient, calls as ``<atem:invoke>`` blocks.

Hand-written, one of the named exceptions to families as declarations (:mod:`.syntax`): each
message names its recipient (``to=self``, ``to=user``, ``to=TOOL``), and only a message
addressed to a tool holds calls: the recipient, not a framing, decides what a block is.

The generation prompt ends ``<|start|>assistant``; the model names the recipient of each
message it writes (``to=self`` is its reasoning, ``to=user`` the answer, ``to=TOOL`` a call)
and ends it with ``<|eom|>`` (more follows) or ``<|eot|>`` (its turn is over)::

     to=self<|message|>thinking…<|eom|>
    <|start|>assistant to=get_weather<|message|><atem:function_calls>
    <atem:invoke name="get_weather">
    <atem:parameter name="city">Paris</atem:parameter>
    </atem:invoke>
    </atem:function_calls><|eot|>

Unless strict, a message its header addresses to no tool (its recipient left out, ``user``,
or a malformed one such as the block's own tag) that opens with a call block is read as one,
each invoke naming a declared tool (``recovered-recipient``), as Ollama reads a fumbled
recipient; any other text in it is the message's.

The reply's first header may come without its leading blank (``to=self<|message|>…``, as a
detokenizer that trims the reply's start gives it): it is the same header. A message with no
recipient is the answer. A call's message holds one ``<atem:function_calls>``
block whose invokes name the recipient; markup in any other message is that message's text
(an answer may show how a call looks). A value is the text between its tags, verbatim: the
template writes strings as they are and other values as their JSON (``true``, ``null``,
``[1, 2]``) with no type mark, so the call is marked ``text_values`` and the argument pipeline
types each value by the tool's schema. A past turn's reasoning is rendered from the message's
``reasoning_content``.

Tool names follow the template's namespaces: it takes a tool's namespace to be its name up to
the first dot and lists ``"NS.*"`` among the valid recipients, so a tool named ``get_weather``
(its own namespace) is also addressed as ``get_weather.get_weather``. A recipient or invoke
name that is a declared tool's namespace, a dot, then that tool's name is that tool; any other
name is read as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .base import Family, ToolIndex
from .channels import ChannelStream, Route, read_role, valid_name
from .grammar import CallForm, Tagged, lit
from .markerstream import DONE, WS, Body, MarkerStream
from .samples import as_text
from .scan import Markers
from .textargs import NameReader, TextBody

__all__ = ["Glimmer"]

_BLOCK = "<atem:function_calls>"
_END_BLOCK = "</atem:function_calls>"
_INVOKE = '<atem:invoke name="'
_END_INVOKE = "</atem:invoke>"
_PARAMETER = '<atem:parameter name="'
_VALUE_END = Markers(("</atem:parameter>",))
_NAME_END = '">'
_RECIPIENT = re.compile(r"(?:\s*to=([^\s<]+))?\s*")
#: A recipient that is markup (the block's own tag, ``atem:function_calls``): no tool's name.
_TAG = re.compile(r"^atem:")

_OPENING, _NEXT, _NAME, _IN_INVOKE, _PNAME, _CLOSE_NAME, _VALUE = range(7)


def tool_named(tools: ToolIndex, written: str) -> str:
    """The declared tool ``written`` addresses: ``NS.NAME`` is NAME when NS is NAME's
    namespace (its name up to the first dot), as the template lists recipients; else
    ``written`` itself (declared, or not: the pipeline decides what an undeclared call is)."""
    if not tools.known or tools.has(written):
        return written
    namespace, dot, rest = written.partition(".")
    if dot and tools.has(rest) and rest.partition(".")[0] == namespace:
        return rest
    return written


class _AtemBody(TextBody):
    """A message to a tool: its ``<atem:function_calls>`` block, each invoke one call.
    ``recipient`` empty: a message its header addressed to no tool (``misaddressed``), a call
    block in it read only when it opens the message, its invokes naming declared tools."""

    def __init__(self, stream: MarkerStream, recipient: str) -> None:
        super().__init__(stream)
        self.recipient = recipient
        self.misaddressed = not recipient
        self.names = NameReader('"', "tool name")
        #: The state after the ``">`` closing the name just read.
        self.after_name = _IN_INVOKE

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _VALUE:
            return self.read_value(s, i, _VALUE_END, _IN_INVOKE)
        if state in (_NAME, _PNAME):
            return self._name(s, i)
        if state == _CLOSE_NAME:
            j = self.expect(s, i, _NAME_END, 'a name not closed by ">')
            if j < 0:
                return i, False
            self.state = self.after_name
            return j, True
        if s[i] in WS:
            return i + 1, True
        if state == _OPENING:
            j = self.expect(s, i, _BLOCK, f"a message to {self.recipient} without {_BLOCK}")
            if j < 0:
                return i, False
            self.state = _NEXT
            return j, True
        if state == _NEXT:
            return self.next_call(s, i, _INVOKE, _END_BLOCK, _NAME, "a block without an invoke")
        j, literal = self.expect_one(
            s, i, (_PARAMETER, _END_INVOKE), f"expected {_PARAMETER}…> or {_END_INVOKE}"
        )
        if j < 0:
            return i, False
        if literal == _PARAMETER:
            self.state = _PNAME
        else:
            self.end_call()
            self.state = _NEXT
        return j, True

    def _name(self, s: str, i: int) -> tuple[int, bool]:
        """A tool's or a parameter's name, up to its closing quote."""
        name, i = self.names.read(self, s, i)
        if name is None:
            return i, False
        is_tool = self.state == _NAME
        if is_tool:
            name = tool_named(self.stream.tools, name)
        if is_tool and self.misaddressed and not self.stream.tools.has(name):
            return self.fail(i, f"{name} is not a declared tool"), False
        if is_tool and name != self.recipient and not self.misaddressed:
            return self.fail(i, f"the invoke names {name}, the message {self.recipient}"), False
        if not self.named(name, is_tool, i):
            return i, False
        self.after_name = _IN_INVOKE if is_tool else _VALUE
        self.state = _CLOSE_NAME
        return i, True


class GlimmerStream(ChannelStream):
    marker = _BLOCK
    opens = ("<|start|>",)
    ends = ("<|eom|>", "<|eot|>")
    header_end = "<|message|>"
    leading = (" to=", "to=", "<|message|>")

    def route(self, opener: str, header: str) -> Route:
        found = read_role(opener, header)
        m = None if found is None else _RECIPIENT.fullmatch(found[1])
        if m is None:
            return Route("bad", note="not an assistant message with a recipient")
        recipient = m.group(1) or "user"
        if recipient == "self":
            return Route("reasoning")
        tool = tool_named(self.tools, recipient)
        stray = recipient == "user" or not valid_name(recipient) or _TAG.search(recipient)
        if stray and not (self.tools.known and self.tools.has(tool)):
            if not self.strict and self.tools.known:  # a call block may open it all the same
                return Route("call", _AtemBody(self, ""))
            if recipient == "user":
                return Route("text")
            return Route("bad", note=f"a malformed recipient {recipient[:40]!r}")
        return Route("call", _AtemBody(self, tool))

    def _give_back(self, body: Body) -> None:
        if isinstance(body, _AtemBody) and body.misaddressed:
            # no call block (or none of declared tools) opens it: the message's text, as a
            # message to the user shows a call's markup (its header, as any header, none)
            for index, cid in body.started:
                self._abort(index, cid, body.reason)
            self._text("".join(self._raw[1:]))
            self._body = None
            self._raw = []
            return
        super()._give_back(body)

    def _close(self, body: Body) -> None:
        if isinstance(body, _AtemBody) and body.misaddressed and body.status == DONE:
            names = ", ".join(dict.fromkeys(call.name for _, call in body.calls))
            self._notice(
                "recovered-recipient",
                f"read the call to {names[:200]} in a message not addressed to it",
            )
        super()._close(body)


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    params = "".join(
        f'<atem:parameter name="{k}">{as_text(v)}</atem:parameter>\n' for k, v in args.items()
    )
    return (
        "<|start|>assistant to=self<|message|>Writing it.<|eom|>"
        f"<|start|>assistant to={name}<|message|><atem:function_calls>\n"
        f'<atem:invoke name="{name}">\n' + params + "</atem:invoke>\n</atem:function_calls><|eom|>"
    )


_RECIPIENT_FORM = '"to=" [^<\\n ]{1,128} ' + lit("<|message|>")

_GLIMMER_FORM = CallForm(
    Tagged(
        before=lit('<atem:invoke name="'),
        between='"\\">"',
        after=lit("</atem:invoke>"),
        arg_open=('<atem:parameter name="{key}">',),
        arg_close=("</atem:parameter>",),
    ),
    open=lit("<atem:function_calls>"),
    close=lit("</atem:function_calls>"),
    # the message's end written apart from the next message's header: the engine's lexer
    # takes a text that is all of one literal and the start of another for the longer one
    sep=f"{lit('<|eom|>')} space {lit('<|start|>assistant')} space {_RECIPIENT_FORM}",
    tail=lit("<|eom|>"),
    blocks=True,
    triggers=("<atem:function_calls>",),
    prefix=_RECIPIENT_FORM,
)


class Glimmer(Family):
    name = "glimmer"
    label = "Muse Glimmer to=TOOL<|message|><atem:invoke>/<atem:parameter> (Muse Glimmer)"
    # not its <|eom|>: more messages of the same turn follow it
    end_tokens = ("<|eot|>",)
    drops_tokens = True
    kept_tokens = ("<|message|>", "<|eom|>")
    samples = (_sample,)
    markers = ("<|start|>", _BLOCK)
    stream_class = GlimmerStream
    grammar = _GLIMMER_FORM
