"""Hunyuan: ``<tool_calls><tool_call>NAME<tool_sep><arg_key>K</arg_key><arg_value>V</arg_value>…``.

The grammar SGLang's Hunyuan reader takes (Hunyuan's ``hy_v3`` models)::

    <tool_calls>
    <tool_call>NAME<tool_sep>
    <arg_key>K</arg_key>
    <arg_value>V</arg_value>
    </tool_call>
    </tool_calls>

with or without the line breaks, one or more calls in the block, a call with no arguments
written ``<tool_call>NAME<tool_sep></tool_call>``. Each value is the text between its tags,
verbatim (strings as they are, other values as their JSON): the call is marked
``text_values`` and the argument pipeline types each value by the tool's schema, as the peer
types them. ``<tool_sep>`` after the name is what tells this grammar from GLM's, which writes
the same argument tags straight after the name and no ``<tool_calls>`` around its calls.

Hunyuan's later models (HY3/HY4, ``tencent-Hy3`` in llama.cpp's templates) write the same
grammar with every tag namespaced: ``<tool_calls:opensource>``,
``<tool_call:opensource>NAME<tool_sep:opensource>``, ``<arg_key:opensource>…`` — the
namespace is read from the block's opening tag, and every tag in the block carries it. HY4
sometimes leaves out the separator after the name (SGLang reads that): unless strict, in a
namespaced block a name followed straight by its first ``<arg_key>`` or by ``</tool_call>`` is
read, named in a ``recovered-separator-missing`` notice. Without a namespace that spelling is
GLM's grammar inside ``<tool_calls>``, and stays text.

Hunyuan A13B writes another grammar, ``<tool_calls>[{"name": …, "arguments": …}]</tool_calls>``
inside ``<answer>…</answer>``: that is the ``apriel`` family's (its template is detected as
such), and the answer tags are dropped where the answer starts (formats/reasoning.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Family
from .grammar import AnyOf, CallForm, Tagged, lit
from .markerstream import WS, MarkerStream
from .reasoning import THINK
from .samples import as_text
from .scan import Markers, markers
from .textargs import NameReader, TextBody

__all__ = ["Hunyuan"]

_BLOCK_OPEN = "<tool_calls>"
_BLOCK_CLOSE = "</tool_calls>"
_CALL_OPEN = "<tool_call>"
_CALL_CLOSE = "</tool_call>"
_SEP = "<tool_sep>"
_KEY = "<arg_key>"
_END_KEY = "</arg_key>"
_VALUE = "<arg_value>"
_END_VALUE = "</arg_value>"
#: The opening of a namespaced block (``<tool_calls:opensource>``): its namespace follows.
_NS_OPEN = "<tool_calls:"
_OPENINGS = Markers((_BLOCK_OPEN, _NS_OPEN))

(
    _BLOCK,
    _NAME_START,
    _NAME,
    _SEP_WAIT,
    _BETWEEN,
    _KEY_NAME,
    _KEY_END,
    _BEFORE_VALUE,
    _IN_VALUE,
    _NAMESPACE,
) = range(10)


def _tag(tag: str, namespace: str) -> str:
    """``tag`` in ``namespace``: ``<tool_call>`` → ``<tool_call:opensource>``."""
    return tag[:-1] + namespace + ">" if namespace else tag


class _HunyuanBody(TextBody):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.names = NameReader(WS + "<", "tool name")
        self.keys = NameReader("<", "argument name")
        self.spaces = NameReader(">", "tag namespace")
        self._tags("")
        #: Calls whose separator was left out, named once each call is read.
        self.no_sep: list[str] = []
        self.fresh = True  # before the first step: which opening tag began the block

    def _tags(self, namespace: str) -> None:
        """The block's tags, all in the namespace its opening tag named."""
        self.call_open = _tag(_CALL_OPEN, namespace)
        self.call_close = _tag(_CALL_CLOSE, namespace)
        self.block_close = _tag(_BLOCK_CLOSE, namespace)
        self.sep = _tag(_SEP, namespace)
        self.key = _tag(_KEY, namespace)
        self.end_key = _tag(_END_KEY, namespace)
        self.value = _tag(_VALUE, namespace)
        self.value_end = markers((_tag(_END_VALUE, namespace),))

    def end_call(self) -> None:
        assert self.call is not None
        if self.no_sep:
            self.stream._notice(
                "recovered-separator-missing",
                f"read a call to {self.call.name} written without {self.sep} after its name",
            )
            self.no_sep = []
        super().end_call()

    def step(self, s: str, i: int) -> tuple[int, bool]:
        if self.fresh:
            self.fresh = False
            if self.stream._raw[:1] == [_NS_OPEN]:
                self.state = _NAMESPACE
        state = self.state
        if state == _IN_VALUE:
            i, complete = self.read_value(s, i, self.value_end, _BETWEEN)
            return i, complete
        if state == _NAMESPACE:
            space, i = self.spaces.read(self, s, i)
            if space is None:
                return i, False
            self._tags(":" + space)
            self.state = _BLOCK
            return i + 1, True  # past its ">"
        if state == _NAME_START and s[i] not in WS:  # whitespace before the name is skipped
            self.state = state = _NAME
        if state == _NAME:
            name, i = self.names.read(self, s, i)
            if name is None or not self.named(name, True, i):
                return i, False
            self.state = _SEP_WAIT
            return i, True
        if state == _KEY_NAME:
            key, i = self.keys.read(self, s, i)
            if key is None or not self.named(key, False, i):
                return i, False
            self.state = _KEY_END
            return i, True
        if state == _KEY_END:
            j = self.expect(s, i, self.end_key, "an argument name not closed by </arg_key>")
            if j < 0:
                return i, False
            self.state = _BEFORE_VALUE
            return j, True
        if s[i] in WS:
            return i + 1, True
        if state == _BLOCK:
            return self.next_call(
                s, i, self.call_open, self.block_close, _NAME_START, "the call block is empty"
            )
        if state == _SEP_WAIT:
            return self._separator(s, i)
        if state == _BEFORE_VALUE:
            j = self.expect(s, i, self.value, "no <arg_value> after </arg_key>")
            if j < 0:
                return i, False
            self.state = _IN_VALUE
            return j, True
        # _BETWEEN
        j, literal = self.expect_one(
            s, i, (self.key, self.call_close), "expected <arg_key> or </tool_call>"
        )
        if j < 0:
            return i, False
        return self._after_tag(literal, j)

    def _after_tag(self, literal: str, j: int) -> tuple[int, bool]:
        """An argument's key opens, or the call closes."""
        if literal == self.key:
            self.state = _KEY_NAME
            return j, True
        self.end_call()
        self.state = _BLOCK
        return j, True

    def _separator(self, s: str, i: int) -> tuple[int, bool]:
        """The separator after the name; unless strict, the first key or the call's close
        straight after the name (the separator left out) is read too."""
        if self.stream.strict or self.sep == _SEP:  # not namespaced: GLM's spelling
            kinds: tuple[str, ...] = (self.sep,)
        else:
            kinds = (self.sep, self.key, self.call_close)
        j, literal = self.expect_one(s, i, kinds, f"no {self.sep} after the tool's name")
        if j < 0:
            return i, False
        if literal == self.sep:
            self.state = _BETWEEN
            return j, True
        self.no_sep.append(literal)
        return self._after_tag(literal, j)


class HunyuanStream(MarkerStream):
    marker = _BLOCK_OPEN
    body_class = _HunyuanBody
    #: HY3's end of sequence, which its template writes straight after a turn's calls.
    turn_end = "<｜hy_eos:opensource｜>"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._opening = _OPENINGS  # type: ignore[misc]  # the namespaced block opens too


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    pairs = "".join(
        f"<arg_key>{k}</arg_key>\n<arg_value>{as_text(v)}</arg_value>\n" for k, v in args.items()
    )
    return f"<tool_calls>\n<tool_call>{name}<tool_sep>\n" + pairs + "</tool_call>\n</tool_calls>"


def _hunyuan(ns: str = "") -> CallForm:
    """Hunyuan's tags, each with the namespace ``ns`` (``:opensource`` in HY3's)."""
    return CallForm(
        Tagged(
            '""',
            lit(f"<tool_sep{ns}>"),
            '""',
            (f"<arg_key{ns}>{{key}}</arg_key{ns}>", f"<arg_value{ns}>"),
            (f"</arg_value{ns}>",),
            markup=(f"</tool_call{ns}>",),
        ),
        open=lit(f"<tool_calls{ns}>"),
        close=lit(f"</tool_calls{ns}>"),
        call_open=lit(f"<tool_call{ns}>"),
        call_close=lit(f"</tool_call{ns}>"),
        triggers=(f"<tool_calls{ns}>",),
    )


_HUNYUAN_FORM = AnyOf((_hunyuan(), _hunyuan(":opensource")))


class Hunyuan(Family):
    name = "hunyuan"
    label = "Hunyuan <tool_calls><tool_call>NAME<tool_sep><arg_key>…<arg_value>… (Hunyuan hy_v3)"
    reasoning = THINK
    end_tokens = ("<|eos|>",)
    kept_tokens = (
        "<tool_call>",
        "<tool_sep>",
        "</tool_call>",
        "</tool_calls>",
        "<arg_key>",
        "</arg_key>",
        "<arg_value>",
        "</arg_value>",
    )
    samples = (_sample,)
    markers = (_BLOCK_OPEN,)
    stream_class = HunyuanStream
    grammar = _HUNYUAN_FORM
