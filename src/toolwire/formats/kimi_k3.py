"""Kimi K3: sections in ``<|open|>TAG<|sep|>…<|close|>TAG<|sep|>`` tags, calls typed by attribute.

Hand-written, one of the named exceptions to families as declarations (:mod:`.syntax`): the
reply is sections that open and close by name (``think``, ``response``, ``tools``), each
reading differently, and a value's type is an attribute naming a schema type: sections, not a
call framing.

The generation prompt opens the assistant's message and its ``think`` section; the model
writes its reasoning, closes it, then answers and calls::

    …reasoning<|close|>think<|sep|><|open|>response<|sep|>On it.<|close|>response<|sep|>
    <|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>
    <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>
    <|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>
    <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>

(written here on several lines; the template writes no whitespace between tags). ``think`` is
reasoning, ``response`` the reply's text, ``tools`` the calls. An argument's ``type`` says how
to read its value, as the template writes it: ``type="string"`` (or no type) is the text
between the tags, kept exactly as a string; any other type (``number``, ``boolean``, ``null``,
``object``, ``array``) is JSON, decoded here because the grammar says so, strictly: a value that
is not JSON breaks the call. A call may instead carry ``<|open|>json type="object"<|sep|>{…}``
``<|close|>json<|sep|>``, all its arguments as one JSON object (the template writes that for
arguments given as text). The call's arguments are that mapping, its argument text the
mapping's JSON as it grows; typing by the tool's schema happens once, in the argument pipeline.
Attribute values unescape ``&quot;`` and ``&amp;``. The ``index`` attribute numbers the calls
and is not an id: the template writes none, so call ids are made here.

The reply starts inside whichever section the prompt opened: with ``reasoning_open`` the
``think`` section, else ``response``. The template opens ``think`` unless ``thinking`` is off;
either closing tag ends that first section.

Blanks around a header's tag (``<|open|> response <|sep|>``, as some detokenizers space the
special tokens) are skipped. A tool's name is an attribute, quoted and escaped, so it may hold
any character but blanks (``calc<beta``). A reply that ends after complete calls, the tools
section never closed (the engine stopped at its end token), keeps those calls, named in a
``block-unclosed`` notice; a call the reply cuts short stays text, with a notice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..messages import ToolCall
from .base import Family, json_text, loads_json
from .channels import ChannelStream, Route
from .grammar import CallForm, Tagged, lit
from .markerstream import DONE, WS, Body, MarkerStream
from .reasoning import ReasoningTags
from .samples import as_text
from .scan import Markers
from .textargs import MAX_NAME

__all__ = ["KimiK3"]

_OPEN = "<|open|>"
_CLOSE = "<|close|>"
_SEP = "<|sep|>"
_CALL = _OPEN + "call"
_END_CALL = _CLOSE + "call" + _SEP
_END_TOOLS = _CLOSE + "tools" + _SEP
_ARGUMENT = _OPEN + "argument"
_JSON = _OPEN + "json"
_VALUE_ENDS = {
    _ARGUMENT: Markers((_CLOSE + "argument" + _SEP,)),
    _JSON: Markers((_CLOSE + "json" + _SEP,)),
}
_ATTRS_END = Markers((_SEP,))
_ATTR = re.compile(r'\s+([A-Za-z_][\w-]*)="([^"]*)"')
#: The longest attribute list read.
_MAX_ATTRS = 512

_CALLS, _CALL_ATTRS, _IN_CALL, _VALUE_ATTRS, _VALUE = range(5)


def _valid_name(name: str) -> bool:
    """A tool's name from its attribute: unescaped already, so only blanks and size matter."""
    return 0 < len(name) <= MAX_NAME and not any(c.isspace() for c in name)


def _attributes(text: str) -> dict[str, str] | None:
    """`` key="value"`` pairs, unescaped; None when ``text`` is anything else."""
    found: dict[str, str] = {}
    pos = 0
    for m in _ATTR.finditer(text):
        if m.start() != pos or m.group(1) in found:
            return None
        found[m.group(1)] = m.group(2).replace("&quot;", '"').replace("&amp;", "&")
        pos = m.end()
    return found if text[pos:].strip() == "" else None


class _ToolsBody(Body):
    """The ``tools`` section: its calls, each argument typed by its ``type`` attribute."""

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.attrs: list[str] = []
        self.attrs_size = 0
        self.tag = ""  # the value being read: _ARGUMENT or _JSON
        self.key = ""
        self.is_text = True
        self.value: list[str] = []
        self.opened = False  # the current value's entry is open in the argument text
        self.name = ""
        self.index = -1
        self.id = ""
        self.args: dict[str, Any] = {}
        self.text: list[str] = []

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _VALUE:
            return self._value(s, i)
        if state in (_CALL_ATTRS, _VALUE_ATTRS):
            return self._attrs(s, i)
        if s[i] in WS:
            return i + 1, True
        if state == _CALLS:
            return self.next_call(
                s, i, _CALL, _END_TOOLS, _CALL_ATTRS, "a tools section without a call"
            )
        j, literal = self.expect_one(
            s, i, (_ARGUMENT, _JSON, _END_CALL), "expected an argument or the call's end"
        )
        if j < 0:
            return i, False
        if literal == _END_CALL:
            self._delta("}" if self.text else "{}")
            call = ToolCall(self.id, self.name, dict(self.args), "".join(self.text))
            self.calls.append((self.index, call))
            self.state = _CALLS
        else:
            self.tag = literal
            self.state = _VALUE_ATTRS
        return j, True

    def end_of_reply(self) -> None:
        if self.state != _CALLS or not self.calls or self.stream.strict:
            super().end_of_reply()
            return
        self.status = DONE
        self.stream._notice(
            "recovered-block-unclosed",
            f"the reply ended before {_END_TOOLS}: the complete calls before it are read",
        )
        self.stream._text(self.stream._raw[-1])  # a closing tag cut short stays text

    def _delta(self, text: str) -> None:
        self.text.append(text)
        self.stream._args(self.index, text)

    def _attrs(self, s: str, i: int) -> tuple[int, bool]:
        """A tag's attributes, up to its ``<|sep|>``."""
        room = _MAX_ATTRS - self.attrs_size
        reach = i + room + len(_SEP)  # no further than attributes may reach (else quadratic)
        j, end = _ATTRS_END.scan(s, i, reach)
        if not end and reach < len(s):
            j = len(s)  # no end within reach: too long
        if j - i > room:  # fail where they outgrow the limit, however the reply was chunked
            return self.fail(i + room, "a tag's attributes are too long"), False
        self.attrs.append(s[i:j])
        self.attrs_size += j - i
        if not end:
            return j, False
        found = _attributes("".join(self.attrs))
        self.attrs = []
        self.attrs_size = 0
        if found is None:
            return self.fail(j, "malformed attributes"), False
        if self.state == _CALL_ATTRS:
            name = found.get("tool", "")
            if not _valid_name(name):
                return self.fail(j, f"a call without a valid tool name ({name[:40]!r})"), False
            self.name = name
            self.index, self.id = self.announce(name)
            self.args = {}
            self.text = []
            self.state = _IN_CALL
            return j + len(end), True
        self.key = found.get("key", "")
        if self.tag == _ARGUMENT and not self._new_key(self.key, j):
            return j, False
        self.is_text = self.tag == _ARGUMENT and found.get("type", "string") == "string"
        self.value = []
        self.state = _VALUE
        return j + len(end), True

    def _new_key(self, key: str, i: int) -> bool:
        """True for an argument not given yet; else the body fails at ``i``."""
        if not key or key in self.args:
            self.fail(i, f"the argument {key!r} is empty or given twice")
            return False
        return True

    def _entry(self, key: str) -> None:
        """Open ``key``'s entry in the streamed argument text."""
        opener = "{" if not self.text else ", "
        self._delta(
            opener + json.dumps(key, ensure_ascii=False) + (': "' if self.is_text else ": ")
        )

    def _value(self, s: str, i: int) -> tuple[int, bool]:
        j, end = _VALUE_ENDS[self.tag].scan(s, i)
        if j > i:
            self.value.append(s[i:j])
            if self.is_text:
                if not self.opened:
                    self._entry(self.key)
                    self.opened = True
                self._delta(json_text(s[i:j]))
        if not end:
            return j, False
        text = "".join(self.value)
        self.opened = False
        self.state = _IN_CALL
        if self.is_text:
            if not self.value:
                self._entry(self.key)
            self._delta('"')
            self.args[self.key] = text
            return j + len(end), True
        try:
            value = loads_json(text)
        except (ValueError, RecursionError) as exc:
            return self.fail(j, f"a value typed as JSON is not JSON ({exc})"), False
        block = value if self.tag == _JSON else {self.key: value}
        if not isinstance(block, dict):
            return self.fail(j, "a json block that is not an object"), False
        for key, item in block.items():
            if not self._new_key(key, j):
                return j, False
            self._entry(key)
            self._delta(text.strip() if self.tag == _ARGUMENT else json.dumps(item))
            self.args[key] = item
        return j + len(end), True


class KimiK3Stream(ChannelStream):
    marker = _OPEN + "tools" + _SEP
    opens = (_OPEN, _CLOSE)
    ends = ("<|end_of_msg|>",)
    header_end = _SEP

    def route(self, opener: str, header: str) -> Route:
        header = header.strip(WS)  # blanks around the tag, between the tokens
        tag = header.partition(" ")[0]
        if tag == "message" or (opener == _CLOSE and header in ("think", "response")):
            return Route("text")  # a section or the message ends, or a message opens
        if opener == _OPEN and header == "think":
            return Route("reasoning")
        if opener == _OPEN and header == "response":
            return Route("text")
        if opener == _OPEN and header == "tools":
            return Route("call", _ToolsBody(self))
        return Route("bad", note=f"no {opener}{tag} section in an assistant's message")


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    arguments = "".join(
        f'<|open|>argument key="{k}" type="{"string" if isinstance(v, str) else "number"}"'
        f"<|sep|>{as_text(v)}<|close|>argument<|sep|>"
        for k, v in args.items()
    )
    return (
        "<|open|>think<|sep|>Writing it.<|close|>think<|sep|><|open|>tools<|sep|>"
        f'<|open|>call tool="{name}" index="1"<|sep|>'
        + arguments
        + "<|close|>call<|sep|><|close|>tools<|sep|>"
    )


_K3_OPEN, _K3_CLOSE, _K3_SEP = "<|open|>", "<|close|>", "<|sep|>"

_KIMI_K3_FORM = CallForm(
    Tagged(
        before=lit(_K3_OPEN + 'call tool="'),
        between=f'"\\" index=\\"" [0-9]{{1,4}} {lit(chr(34) + _K3_SEP)}',
        after=lit(_K3_CLOSE + "call" + _K3_SEP),
        arg_open=(_K3_OPEN + 'argument key="{key}" type="{type}"' + _K3_SEP,),
        arg_close=(_K3_CLOSE + "argument" + _K3_SEP,),
        types=(("integer", "number"),),
    ),
    open=lit(_K3_OPEN + "tools" + _K3_SEP),
    close=f"{lit(_K3_CLOSE + 'tools' + _K3_SEP)} ({lit(_K3_CLOSE + 'message' + _K3_SEP)})?",
    triggers=(_K3_OPEN + "tools" + _K3_SEP,),
)


class KimiK3(Family):
    name = "kimi-k3"
    label = 'Kimi K3 <|open|>tools<|sep|><|open|>call tool="NAME"…<|open|>argument… (Kimi K3)'
    reasoning = ReasoningTags(channel_openers=("<|open|>think<|sep|>",))
    end_tokens = ("<|end_of_msg|>",)
    drops_tokens = True
    kept_tokens = ("<|open|>", "<|sep|>", "<|close|>")
    samples = (_sample,)
    markers = (_OPEN + "tools" + _SEP,)
    stream_class = KimiK3Stream
    grammar = _KIMI_K3_FORM
