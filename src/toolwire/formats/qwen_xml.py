"""Qwen XML: ``<tool_call>`` around ``<function=NAME>`` and ``<parameter=P>`` blocks.

In full: ``<tool_call>\\n<function=NAME>\\n<parameter=P>\\nvalue\\n</parameter>\\n``
``</function>\\n</tool_call>``.

Written by Qwen3-Coder, Qwen3.5/3.6 and Nemotron-3-Nano. A parameter's value is the text
between its tags, less the one newline the template puts on each side, several lines
included. The grammar writes every value as text, so the call's arguments are that text
(``text_values`` is set on the call): the argument pipeline reads a value for a parameter
that is not text by the tool's schema, where every change is named. The argument text streams
as the JSON of that mapping of strings as it grows. JSON inside ``<tool_call>`` is not this
family's call.

Qwen3-Coder sometimes leaves out the opening ``<tool_call>`` but writes the rest:
``<function=NAME>…</function>\n</tool_call>``. Unless strict, that is read as the call it is
(the closing tag confirms it), and the repair is named in a ``recovered-unopened-call``
notice. It also writes the call bare, with neither tag (vLLM and SGLang read that): a
``<function=NAME>…</function>`` naming a declared tool, that the reply ends after or that
another bare call follows, is read under the same notice. Anything else after the bare
``</function>`` (prose), or a name no declared tool has, and it stays text: text that never
became a call is given back without a notice.

A reply that ends inside a call (a length limit, a stop) is never a call lost in silence. A
call whose ``</function>`` came, so that every argument is whole, and only ``</tool_call>``
(or part of it) is missing, is read unless strict, named in a ``recovered-block-unclosed``
notice, as vLLM reads it. Cut anywhere before, the call is withdrawn and its text follows as
text, with a ``call-abandoned`` notice: a value may be cut short, and nothing half-written
runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Family
from .grammar_forms import XML_PARAMETERS, tag_block
from .markerstream import Body
from .reasoning import THINK
from .xmlparams import FUNCTION, OPEN_TAG, UNOPENED, XmlBody, XmlStream

__all__ = ["QwenXml"]


class QwenXmlStream(XmlStream):
    marker = OPEN_TAG
    body_class = XmlBody

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.strict:
            self._opening = UNOPENED  # type: ignore[misc]  # per reader: strict or not

    def _give_back(self, body: Body) -> None:
        if self._raw[:1] == [FUNCTION] and not body.started:
            self._text("".join(self._raw))  # a bare <function= that never became a call
            self._body = None
            self._raw = []
            return
        super()._give_back(body)


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


_QWEN_XML_FORM = tag_block("<tool_call>", "</tool_call>", XML_PARAMETERS)


class QwenXml(Family):
    name = "qwen-xml"
    label = "Qwen XML <function=…><parameter=…> (Qwen3-Coder, Qwen3.5/3.6, Nemotron-3-Nano)"
    reasoning = THINK
    end_tokens = ("<|im_end|>", "<|endoftext|>")
    kept_tokens = ("</tool_call>",)
    samples = (_sample,)
    markers = (OPEN_TAG,)
    stream_class = QwenXmlStream
    grammar = _QWEN_XML_FORM
