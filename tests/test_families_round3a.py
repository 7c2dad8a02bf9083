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
from toolwire.formats.detect import detect_format

from .test_formats import check_stream


def calls(family: str, reply: str, **kw: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.arguments) for c in get_family(family).parse(reply, **kw).calls]


def codes(family: str, reply: str, **kw: Any) -> list[str]:
    tools = kw.pop("tools", None)
    stream = get_family(family).stream(tools, **kw)
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


# --- DeepSeek V4 DSML: damaged wrappers, bare invokes, quoted markup ------------------------

D = "<｜DSML｜"
INVOKE = (
    f'{D}invoke name="get_weather">\n{D}parameter name="city" string="true">SF</｜DSML｜parameter>'
    "\n</｜DSML｜invoke>"
)
BLOCK = f"{D}tool_calls>\n{INVOKE}\n</｜DSML｜tool_calls>"
SF = ("get_weather", {"city": "SF"})
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


@pytest.mark.parametrize(
    ("reply", "content"),
    [
        (f"\n\n{D}toolcalls>\n\n{INVOKE}", ""),  # misspelt wrapper, no closer
        (f"\n\n{D}tool_calls\n{BLOCK}", ""),  # a wrapper that lost its >
        (f"\n\n{D}tool_calls<tool_calls>\n\n{BLOCK}", ""),
        (f"\n\n{D}tool_calls<tool_calls>\n\n{INVOKE}", ""),
        (f"Checking files.\n\n{D} SugarPanel>\n{BLOCK}", "Checking files."),
        (f"\n\n{D}tool_calls...\n\n{INVOKE}", ""),
        (f"Final scan:\n\n{D}tool_calls-ok Let's scan the outputs.\n{INVOKE}", "Final scan:"),
        # the damaged tag runs into the next marker on its own line: however the reply is
        # cut, the marker ends it (a piece that may begin the marker is held back)
        (f"{D}{BLOCK}", ""),
    ],
)
def test_dsml_damaged_wrapper_before_a_call_is_read_past(reply: str, content: str) -> None:
    result = get_family("deepseek-dsml").parse(reply, tools=TOOLS)
    assert [(c.name, c.arguments) for c in result.calls] == [SF]
    assert result.content.strip() == content
    assert D not in result.content
    assert "recovered-misspelt-tag" in codes("deepseek-dsml", reply, tools=TOOLS)
    strict = get_family("deepseek-dsml").parse(reply, tools=TOOLS, strict=True)
    assert D in strict.content  # strict: the damaged tag is not read past
    for size in (1, 3, 5):
        check_stream("deepseek-dsml", reply, pieces(reply, size), tools=TOOLS)


def test_dsml_bare_invoke_is_read_under_a_notice_only_for_a_declared_tool() -> None:
    reply = f"Looking it up.\n{INVOKE}"
    assert calls("deepseek-dsml", reply, tools=TOOLS) == [SF]
    assert "recovered-unopened-call" in codes("deepseek-dsml", reply, tools=TOOLS)
    assert calls("deepseek-dsml", reply, tools=TOOLS, strict=True) == []
    assert calls("deepseek-dsml", reply) == []  # no declared tools: nothing confirms a call
    other = [{"type": "function", "function": {"name": "search", "parameters": {}}}]
    assert calls("deepseek-dsml", reply, tools=other) == []


def test_dsml_damaged_tag_with_no_call_after_stays_text() -> None:
    for reply in (f"Example: '{D}toolcalls>'\n", f"{D}tool_calls-ok and then prose only."):
        result = get_family("deepseek-dsml").parse(reply, tools=TOOLS)
        assert result.calls == []
        assert result.content == reply


@pytest.mark.parametrize("fence", ["```", "~~~"])
def test_dsml_quoted_in_a_code_fence_is_prose(fence: str) -> None:
    reply = f"Example:\n{fence}xml\n{BLOCK}\n{fence}\n"
    result = get_family("deepseek-dsml").parse(reply, tools=TOOLS)
    assert result.calls == []
    assert result.content == reply
    assert "call-not-read" not in codes("deepseek-dsml", reply, tools=TOOLS)
    # after the fence closes, a call is a call again
    after = reply + f"Now for real:\n{BLOCK}"
    assert calls("deepseek-dsml", after, tools=TOOLS) == [SF]
    for size in (1, 2, 7):
        check_stream("deepseek-dsml", after, pieces(after, size), tools=TOOLS)


# --- Hermes: later calls written without their opening tag (vLLM's hermes_2_pro template) ---

H1 = '{ "arguments": {"city": "Paris", "days": 3}, "name": "get_weather"}'
H2 = '{ "arguments": {"time": "07:30"}, "name": "set_alarm"}'
HERMES_TURN = f"<tool_call>\n{H1}\n</tool_call> {H2}\n</tool_call> "


def test_hermes_reads_a_call_after_a_closed_call_without_its_opening_tag() -> None:
    assert calls("hermes", HERMES_TURN) == [
        ("get_weather", {"city": "Paris", "days": 3}),
        ("set_alarm", {"time": "07:30"}),
    ]
    assert "recovered-unopened-call" in codes("hermes", HERMES_TURN)
    assert calls("hermes", HERMES_TURN, strict=True) == [
        ("get_weather", {"city": "Paris", "days": 3})
    ]
    for size in (1, 2, 5):
        check_stream("hermes", HERMES_TURN, pieces(HERMES_TURN, size))


@pytest.mark.parametrize(
    "after",
    [
        f" {H2} and then prose",  # an object with no </tool_call>: text
        ' {"not": "a call"}\n</tool_call>',  # not a call's shape: text
        f"\nSo that is it. {H2}\n</tool_call>",  # prose between: not right after the call
    ],
)
def test_hermes_object_after_a_call_that_is_not_an_unopened_call_stays_text(after: str) -> None:
    reply = f"<tool_call>\n{H1}\n</tool_call>{after}"
    result = get_family("hermes").parse(reply)
    assert [c.name for c in result.calls] == ["get_weather"]
    assert result.content == after
    assert "recovered-unopened-call" not in codes("hermes", reply)
    for size in (1, 3):
        check_stream("hermes", reply, pieces(reply, size))


def test_vllm_hermes_2_pro_template_detects_as_hermes() -> None:
    from pathlib import Path

    from toolwire.templates import ChatTemplate

    path = (
        Path(__file__).parent
        / "fixtures/unseen_templates/vllm-tool_chat_template_hermes_2_pro.jinja"
    )
    detection = detect_format(ChatTemplate(path.read_text()))
    assert detection.format == "hermes"
    assert detection.via == "probe"


# --- Hunyuan HY3/HY4: namespaced tags, and the separator left out ----------------------------

HY4 = (
    "<tool_calls:opensource><tool_call:opensource>get_weather<arg_key:opensource>city"
    "</arg_key:opensource><arg_value:opensource>Beijing</arg_value:opensource>"
    "</tool_call:opensource></tool_calls:opensource>"
)


def hy(namespace: str, sep: bool = True) -> str:
    def t(tag: str) -> str:
        return tag[:-1] + namespace + ">"

    call = (
        f"{t('<tool_call>')}get_weather{t('<tool_sep>') if sep else ''}\n"
        f"{t('<arg_key>')}city{t('</arg_key>')}\n{t('<arg_value>')}Beijing{t('</arg_value>')}\n"
        f"{t('</tool_call>')}\n"
    )
    zero = (
        f"{t('<tool_call>')}get_current_date{t('<tool_sep>') if sep else ''}\n{t('</tool_call>')}\n"
    )
    return f"{t('<tool_calls>')}\n{call}{zero}{t('</tool_calls>')}"


def test_hunyuan_reads_hy4_namespaced_tags_without_separator() -> None:
    assert calls("hunyuan", HY4) == [("get_weather", {"city": "Beijing"})]
    assert "recovered-separator-missing" in codes("hunyuan", HY4)
    assert calls("hunyuan", HY4, strict=True) == []
    for size in (1, 4, 9):
        check_stream("hunyuan", HY4, pieces(HY4, size))


@pytest.mark.parametrize("namespace", ["", ":opensource"])
def test_hunyuan_namespace_is_the_blocks_own(namespace: str) -> None:
    """The family's two forms: its tags plain, or all in HY3's and HY4's ``:opensource``
    namespace (a template writing another namespace is learned: test_derived.py)."""
    reply = "Let me check.\n" + hy(namespace)
    want = [("get_weather", {"city": "Beijing"}), ("get_current_date", {})]
    assert calls("hunyuan", reply) == want
    assert calls("hunyuan", reply, strict=True) == want
    assert not [c for c in codes("hunyuan", reply) if c.startswith("recovered-")]
    # the separator left out: read, named, for every syntax whose separator is a tag
    assert calls("hunyuan", hy(namespace, sep=False)) == want
    assert "recovered-separator-missing" in codes("hunyuan", hy(namespace, sep=False))
    for size in (1, 6):
        check_stream("hunyuan", reply, pieces(reply, size))


def test_hunyuan_tags_of_another_namespace_do_not_close_the_block() -> None:
    mixed = HY4.replace("</tool_call:opensource>", "</tool_call:other>")
    assert calls("hunyuan", mixed) == []
    assert get_family("hunyuan").parse(mixed).content == mixed


def test_tencent_hy3_template_detects_as_hunyuan_and_reads_back_two_calls() -> None:
    from pathlib import Path

    from toolwire.formats.detect import DERIVE_CALLS, DERIVE_TOOLS, _turn, assistant_text
    from toolwire.templates import ChatTemplate

    path = Path(__file__).parent / "fixtures/unseen_templates/tencent-Hy3.jinja"
    template = ChatTemplate(path.read_text(encoding="utf-8"))
    detection = detect_format(template)
    assert (detection.format, detection.via) == ("hunyuan", "probe")
    user = [{"role": "user", "content": "Weather in Paris, and wake me at 7:30."}]
    text, _ = assistant_text(template, user, _turn(DERIVE_CALLS, None, False), DERIVE_TOOLS)
    assert "<tool_calls:opensource>" in text
    result = get_family("hunyuan").parse(text, DERIVE_TOOLS)
    assert [c.name for c in result.calls] == [c.name for c in DERIVE_CALLS]
    assert result.content.strip() == ""
