"""MiniCPM3's fenced Python calls, read from its published template's own renderings.

The template is vLLM's example for MiniCPM3 (``tests/fixtures/unseen_templates/``, byte for
byte, named in its ``sources.json``): a turn's calls are one ``NAME(key=tojson(value), ...)``
a line, inside a ```` ```python ```` fence between ``<|tool_call_start|>`` and
``<|tool_call_end|>``, then the answer. LFM2 opens its calls with the same token, so each
family is checked against the other's replies too (the cross-family matrix checks the rest).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolwire import detect_format, get_family, load_template
from toolwire.events import CallAbort, CallEnd, Notice, TextDelta
from toolwire.formats.detect import DERIVE_CALLS, DERIVE_TOOLS, assistant_text
from toolwire.messages import ToolCall

from .test_formats import check_stream, parse, stream_events

TEMPLATE = Path(__file__).parent / "fixtures" / "unseen_templates"
NAME = "vllm-tool_chat_template_minicpm3.jinja"
USER = {"role": "user", "content": "What will the weather be in Paris, and wake me at 7:30?"}

Call = tuple[str, dict[str, Any]]

S = "<|tool_call_start|>"
E = "<|tool_call_end|>"
WEATHER: Call = ("get_weather", {"city": "Paris", "days": 3})
ALARM: Call = ("set_alarm", {"time": "07:30", "loud": True})


def block(*lines: str) -> str:
    """A call block as the template writes it around ``lines``."""
    return S + "\n```python\n" + "".join(line + "\n" for line in lines) + "```\n" + E + "\n"


W = 'get_weather(city="Paris",days=3)'
A = 'set_alarm(time="07:30",loud=true)'

#: (reply, content, calls): replies read with no notice.
VALID: list[tuple[str, str, list[Call]]] = [
    (block(W), "\n", [WEATHER]),
    (block(W, A), "\n", [WEATHER, ALARM]),
    # the answer after the block is text, from the line break the template writes before it
    # (as every family leaves the white space after its calls)
    (block(W) + "It will rain.", "\nIt will rain.", [WEATHER]),
    # text before the block
    ("Let me look.\n" + block(W), "Let me look.\n\n", [WEATHER]),
    # thinking first, as the template writes it back
    (
        "<|thought_start|>\nThe user wants Paris.\n<|thought_end|>\n" + block(W),
        "\n",
        [WEATHER],
    ),
    # no arguments, a dotted name, nested JSON values, null, a JSON-escaped string
    (block("ping()"), "\n", [("ping", {})]),
    (
        block('Calendar.create_event(title="A \\"b\\"\\nc",tags=["x",1.5],extra={"k":null})'),
        "\n",
        [
            (
                "Calendar.create_event",
                {"title": 'A "b"\nc', "tags": ["x", 1.5], "extra": {"k": None}},
            )
        ],
    ),
    # a character past the BMP as a JSON escape pair; Python's triple quotes, lines and all
    (block('note(text="\\ud83d\\ude00 ok")'), "\n", [("note", {"text": "\U0001f600 ok"})]),
    (block('note(text="""a\n\tb""")'), "\n", [("note", {"text": "a\n\tb"})]),
    # spaces as Python allows them, Python's own literals, a trailing comma
    (block("set_alarm( time = '07:30', loud = True, )"), "\n", [ALARM]),
    # no line break after the end token; the turn's end token there is no text (for every
    # declared family)
    (block(W).rstrip("\n") + "<|im_end|>", "", [WEATHER]),
    # the fence closed on the call's own line: the words around the calls are matched with
    # any white space between, for every declared family
    (S + "\n```python\n" + W + "```\n" + E, "", [WEATHER]),
    # two calls on one line: calls one a line are read with any white space between
    (S + "\n```python\n" + W + " " + A + "\n```\n" + E, "", [WEATHER, ALARM]),
]

#: (reply, calls read before the break): replies that break the grammar, all text.
NEAR: list[tuple[str, list[Call]]] = [
    # LFM2's list after the token is not MiniCPM3's block
    (S + '[get_weather(city="Paris")]' + E, []),
    # no fence, or another language's
    (S + "\n" + W + "\n" + E, []),
    (S + "\n```json\n" + W + "\n```\n" + E, []),
    # an empty block; a positional value
    (S + "\n```python\n```\n" + E, []),
    (block('get_weather("Paris")'), []),
    # a name no tool has, text after the fence
    (block('get weather(city="Paris")'), []),
    (S + "\n```python\n" + W + "\n```\nand more" + E, []),
]


def test_an_unquoted_value_is_read_as_text_named_and_strict_refuses_it() -> None:
    """A value no literal spells is read as text, as for every Python syntax (a template
    writing ``{{ value }}`` teaches it), named; strict reads the grammar only."""
    reply = block("get_weather(city=Paris)")
    result = parse("minicpm3", reply, None)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {"city": "Paris"})]
    assert len(result.notices) == 1 and "unquoted value" in result.notices[0]
    strict = parse("minicpm3", reply, None, strict=True)
    assert strict.calls == [] and strict.content == reply


PLAIN = ["Hello, world!", "```python\nprint(1)\n```", "a <|tool_call_end|> alone"]


# --------------------------------------------------------------------------- what it reads


@pytest.mark.parametrize(("reply", "content", "calls"), VALID)
def test_valid_replies(reply: str, content: str, calls: list[Call]) -> None:
    for strict in (False, True):
        result = parse("minicpm3", reply, None, strict=strict)
        assert [(c.name, c.arguments) for c in result.calls] == calls
        assert (result.content, result.notices) == (content, [])


@pytest.mark.parametrize(("reply", "calls"), NEAR)
def test_near_misses_are_text_with_a_notice(reply: str, calls: list[Call]) -> None:
    for strict in (False, True):
        result = parse("minicpm3", reply, None, strict=strict)
        assert [(c.name, c.arguments) for c in result.calls] == calls
        assert result.content == reply
        assert len(result.notices) == 1 and "is not a call" in result.notices[0]


@pytest.mark.parametrize("reply", PLAIN)
def test_plain_text_is_text(reply: str) -> None:
    result = parse("minicpm3", reply, None)
    assert (result.content, result.calls, result.notices) == (reply, [], [])


def test_thinking_is_reasoning_and_never_read_for_calls() -> None:
    reply = "<|thought_start|>\nMaybe " + block(W) + "<|thought_end|>\nNo call."
    result = parse("minicpm3", reply, None)
    assert result.calls == []
    assert result.reasoning == "\nMaybe " + block(W)
    assert result.content == "No call."


def test_a_truncated_reply_gives_its_text_back_with_a_notice() -> None:
    whole = block(W, 'set_alarm(time="07:30\\nwake",loud=true)')
    for end in (len(S) + 5, whole.index("set_alarm") + 12):
        reply = whole[:end]
        for strict in (False, True):
            result = parse("minicpm3", reply, None, strict=strict)
            assert (result.calls, result.content) == ([], reply)
            assert result.notices == [
                f"text opening with {S} is not a call (the reply ended inside the call); "
                "it stays reply text"
            ]
        events = stream_events("minicpm3", [reply[i : i + 3] for i in range(0, len(reply), 3)])
        assert not any(isinstance(e, CallEnd) for e in events)
        started = [e for e in events if isinstance(e, CallAbort)]
        assert len(started) == reply.count("(")  # each call announced is withdrawn
        assert any(isinstance(e, Notice) and e.code == "call-not-read" for e in events)
    # cut where only the block's closing words were due, every call whole: read, named (for
    # every declared family), strict refusing
    reply = whole[: whole.index(E) + 4]
    result = parse("minicpm3", reply, None)
    assert [c.name for c in result.calls] == ["get_weather", "set_alarm"]
    assert len(result.notices) == 1 and "closing words never came" in result.notices[0]
    assert parse("minicpm3", reply, None, strict=True).calls == []


def test_raw_line_breaks_in_a_string_are_read_and_named_and_strict_refuses_them() -> None:
    reply = block('write(path="a.py",text="def f():\n\treturn 1\n")')
    result = parse("minicpm3", reply, None)
    assert [c.arguments for c in result.calls] == [
        {"path": "a.py", "text": "def f():\n\treturn 1\n"}
    ]
    assert len(result.notices) == 1 and "raw line breaks" in result.notices[0]
    events = stream_events("minicpm3", list(reply))
    assert [e.code for e in events if isinstance(e, Notice)] == ["recovered-raw-controls"]
    strict = parse("minicpm3", reply, None, strict=True)
    assert (strict.calls, strict.content) == ([], reply)
    other = parse("minicpm3", block('write(text="a\x01b")'), None)
    assert other.calls == [] and "a control character" in other.notices[0]


# --------------------------------------------------------------------------- streaming


@pytest.mark.parametrize(("reply", "content", "calls"), VALID)
@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_streamed_chunks_read_as_the_whole_reply(
    reply: str, content: str, calls: list[Call], size: int
) -> None:
    chunks = [reply[i : i + size] for i in range(0, len(reply), size)]
    check_stream("minicpm3", reply, chunks)
    text = "".join(e.text for e in stream_events("minicpm3", chunks) if isinstance(e, TextDelta))
    assert S not in text and "```" not in text and E not in text  # no markup leaks
    assert text == content


# --------------------------------------------------------------------------- the template


def _rendered(calls: tuple[ToolCall, ...], content: str | None) -> tuple[str, bool]:
    turn = {"role": "assistant", "content": content, "tool_calls": [c.to_openai() for c in calls]}
    return assistant_text(load_template(TEMPLATE / NAME), [USER], [turn], DERIVE_TOOLS)


def test_the_template_is_detected_by_its_own_two_calls() -> None:
    found = detect_format(load_template(TEMPLATE / NAME))
    assert (found.format, found.via, found.unproven) == ("minicpm3", "probe", ())
    assert found.call_text == block(W)


def test_a_round_trip_through_the_template() -> None:
    """Two calls rendered by the template, the second's string holding a line break, quotes
    and markup, read back as the same calls, with the answer after them as the text."""
    calls = (
        *DERIVE_CALLS,
        ToolCall("k1", "get_weather", {"city": 'Saint-Étienne "l\'\\ville"\n', "days": 0}),
    )
    text, opened = _rendered(calls, "Here you go.")
    assert text.startswith(S + "\n```python\nget_weather(") and '\\"wake\\"' in text
    result = get_family("minicpm3").parse(text, DERIVE_TOOLS, reasoning_open=opened)
    assert [(c.name, c.arguments) for c in result.calls] == [(c.name, c.arguments) for c in calls]
    assert result.content.strip() == "Here you go."
    assert result.notices == []
    for size in (1, 2, 3, 7):
        check_stream("minicpm3", text, [text[i : i + size] for i in range(0, len(text), size)])


def test_the_grammar_takes_what_the_template_renders() -> None:
    """The constrained form accepts the template's own two calls and refuses them with a
    wrong name, a missing closer or a wrongly typed value."""
    pytest.importorskip("llguidance")
    from .test_grammars import check_rendering

    text, _ = _rendered(DERIVE_CALLS, None)
    check_rendering("minicpm3", text)


def test_lfm2_and_minicpm3_do_not_read_each_others_blocks() -> None:
    lfm2, minicpm3 = get_family("lfm2"), get_family("minicpm3")
    text, _ = _rendered(DERIVE_CALLS, None)
    assert minicpm3.parse(text).calls and lfm2.parse(text).calls == []
    lfm2_text = lfm2.sample(1)
    assert lfm2.parse(lfm2_text).calls and minicpm3.parse(lfm2_text).calls == []


# --------------------------------------------------------------------------- bounds


@pytest.mark.parametrize(
    "reply",
    [
        lambda n: (S + "\n```python\nget_weather(cit") * (n // 35),
        lambda n: block("write(text=" + repr("a\\n'\"" * (n // 5)) + ")"),
        lambda n: block(*[W] * (n // 33)),
    ],
    ids=["names", "one-long-string", "many-calls"],
)
def test_work_is_linear(reply: Any) -> None:
    from .test_fuzz_parsers import _work  # not at the top: it reads this module's lists

    family = get_family("minicpm3")
    small, large = reply(3_000), reply(12_000)
    for chunk in (7, 1_000_000):
        ratio = _work(family, large, chunk) / max(1, _work(family, small, chunk))
        assert ratio < 4 * 1.5, ratio


# --------------------------------------------------------------------------- shared lists

#: What the cross-family matrix and the streaming tests read for this family.
MY_VALID: dict[str, list[tuple[str, str, list[Call]]]] = {"minicpm3": VALID}
MY_REPLIES = (
    [("minicpm3", r) for r, _, _ in VALID]
    + [("minicpm3", r) for r, _ in NEAR]
    + [("minicpm3", r) for r in PLAIN]
)
