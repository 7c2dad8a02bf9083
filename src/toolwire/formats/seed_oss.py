"""Seed-OSS: ``<seed:tool_call>`` around Qwen3-Coder's ``<function=NAME>`` body.

In full: ``<seed:tool_call>\\n<function=NAME>\\n<parameter=P>value</parameter>\\n``
``</function>\\n</seed:tool_call>``, one block per call; the turn ends with ``<seed:eos>``.

Written by ByteDance Seed-OSS. The body is Qwen3-Coder's, read by the same code, except that
the template writes a value right against its tags: every character between
``<parameter=P>`` and ``</parameter>`` is the value, newlines included. Values are text
(strings as they are, others through Jinja's ``string``, so ``True`` and Python's list
syntax), marked ``text_values`` for the argument pipeline to type by the tool's schema.

Thinking is ``<seed:think>…</seed:think>`` (a reasoning opener like ``<think>``). With a
thinking budget the model reflects on it inside that block
(``<seed:cot_budget_reflect>…</seed:cot_budget_reflect>``), and with a budget of 0 the
generation prompt writes the whole block itself: either way the reflection is part of the
reasoning, kept verbatim as the template writes it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Family
from .grammar_forms import XML_PARAMETERS, tag_block
from .markerstream import MarkerStream
from .reasoning import ReasoningTags
from .samples import as_text
from .scan import Markers
from .xmlparams import XmlBody

__all__ = ["SeedOss"]

_OPEN_TAG = "<seed:tool_call>"


class _SeedBody(XmlBody):
    open_tag = _OPEN_TAG
    close_tag = "</seed:tool_call>"
    value_end = Markers(("</parameter>",))
    trims_newlines = False
    reads_unclosed = False


class SeedOssStream(MarkerStream):
    marker = _OPEN_TAG
    body_class = _SeedBody


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    params = "".join(f"<parameter={k}>{as_text(v)}</parameter>\n" for k, v in args.items())
    return f"<seed:tool_call>\n<function={name}>\n{params}</function>\n</seed:tool_call>"


_SEED_OSS_FORM = tag_block("<seed:tool_call>", "</seed:tool_call>", XML_PARAMETERS)


class SeedOss(Family):
    name = "seed-oss"
    label = "Seed-OSS <seed:tool_call><function=…><parameter=…> (ByteDance Seed-OSS)"
    reasoning = ReasoningTags(blocks={"<seed:think>": "</seed:think>"})
    end_tokens = ("<seed:eos>",)
    kept_tokens = ("</seed:tool_call>",)
    samples = (_sample,)
    markers = (_OPEN_TAG,)
    stream_class = SeedOssStream
    grammar = _SEED_OSS_FORM
