"""Damaged tags and quoted markup in DSML, Qwen XML and Hunyuan replies, as the peers read them.

The replies are facts transcribed from SGLang's unit tests
(``test/registered/unit/function_call/``: ``test_qwen3_coder_detector.py`` at commit
0bbe61a61a1964be3758c1672c5522aa3aafdd6b, ``test_deepseekv4_detector.py`` at
0461b9e3fcab1c01a556513de67d406005645f07, ``test_hunyuan_detector.py`` at
0ff9c986c7d25f30d8bf16c9e1b0ffeab3bcc0cf). Each tolerance is named, refused when strict, and
streaming in small pieces gives what one parse gives.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolwire import get_family
from toolwire.events import Notice

from .test_formats import check_stream


def calls(family: str, reply: str, **kw: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.arguments) for c in get_family(family).parse(reply, **kw).calls]


def codes(family: str, reply: str, **kw: Any) -> list[str]:
    stream = get_family(family).stream(None, **kw)
    return [e.code for e in stream.feed(reply) + stream.finish() if isinstance(e, Notice)]


def pieces(reply: str, size: int) -> list[str]:
    return [reply[k : k + size] for k in range(0, len(reply), size)]


# --- Qwen3-Coder: a closing </parameter> drifted into another spelling -----------------------

QWEN_DRIFT = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nShanghai\n{end}\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
)


@pytest.mark.parametrize("end", ["</parameter1>", "</parameter_function>", "</parameter"])
def test_qwen_drifted_end_marker_closes_the_value(end: str) -> None:
    reply = QWEN_DRIFT.format(end=end)
    assert calls("qwen-xml", reply) == [("get_weather", {"city": "Shanghai", "days": "3"})]
    assert "recovered-misspelt-tag" in codes("qwen-xml", reply)
    for size in (1, 2, 3, 7):
        check_stream("qwen-xml", reply, pieces(reply, size))


def test_qwen_drifted_end_marker_refused_when_strict() -> None:
    reply = QWEN_DRIFT.format(end="</parameter1>")
    assert calls("qwen-xml", reply, strict=True) == [
        ("get_weather", {"city": "Shanghai\n</parameter1>\n<parameter=days>\n3"})
    ]


def test_qwen_closing_tag_text_not_before_a_tag_stays_in_the_value() -> None:
    # </parameters> followed by more text is the value's own text, not a drifted tag
    value = "a\n</parameters>\nmore"
    reply = (
        f"<tool_call>\n<function=f>\n<parameter=x>\n{value}\n</parameter>\n</function>\n"
        "</tool_call>"
    )
    assert calls("qwen-xml", reply) == [("f", {"x": value})]
    assert "recovered-misspelt-tag" not in codes("qwen-xml", reply)
