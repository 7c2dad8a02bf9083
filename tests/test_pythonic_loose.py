"""Python calls written as published templates write them, not as Python writes literals.

vLLM's and SGLang's pythonic templates (``tests/fixtures/unseen_templates/``) write values
with ``"%s" | format(value)`` or ``"{{ value }}"``: unquoted text (``city=Paris``), quotes left
unescaped, and (Gemma 3's) no comma between two arguments; SGLang's Llama 4 template drops the
list's brackets. Each is read unless strict, named ``recovered-python-values``; what a
literal cannot be told from stays as before (a list's items, a string's prefix, a number too
long). Whole replies and replies in chunks give the same result.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolwire import get_family
from toolwire.events import CallArgsDelta, Notice
from toolwire.formats.base import ParseResult, assemble
from toolwire.formats.pyliteral import LOOK_AHEAD

from .replies import TOOLS


def _read(family: str, reply: str, size: int = 0, **kw: Any) -> tuple[ParseResult, list[str]]:
    stream = get_family(family).stream(kw.pop("tools", TOOLS), **kw)
    size = size or len(reply) or 1
    events = [e for k in range(0, len(reply), size) for e in stream.feed(reply[k : k + size])]
    events += stream.finish()
    return assemble(events), [e.code for e in events if isinstance(e, Notice)]


def _calls(result: ParseResult) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.arguments) for c in result.calls]


LOOSE = [
    # unquoted text, up to the comma before the next key= or the call's )
    ("[get_weather(city=Paris, days=3)]", [("get_weather", {"city": "Paris", "days": 3})]),
    ("[get_weather(city=New York, NY)]", [("get_weather", {"city": "New York, NY"})]),
    (
        '[get_weather(city=<b>"Nice" & co</b> , days=2)]',
        [("get_weather", {"city": '<b>"Nice" & co</b>', "days": 2})],
    ),
    ("[get_weather(city=07:30\nlater)]", [("get_weather", {"city": "07:30\nlater"})]),
    ("[get_weather(city=f(x), days=1)]", [("get_weather", {"city": "f(x)", "days": 1})]),
    # a quote the template left unescaped is the text's own
    ('[get_weather(city="say "hi" now", days=3)]', [("get_weather", {"city": 'say "hi" now'})]),
    ('[get_weather(city="a", b")]', [("get_weather", {"city": 'a", b'})]),
    # a comma left out between two arguments
    ('[get_weather(city="Paris"days=3)]', [("get_weather", {"city": "Paris", "days": 3})]),
    ("[get_weather(city='Paris' days=3)]", [("get_weather", {"city": "Paris", "days": 3})]),
    # after a number: the number does not swallow the next argument (days: "3urgent=True")
    (
        "[get_weather(days=3urgent=True, city='Paris')]",
        [("get_weather", {"days": 3, "urgent": True, "city": "Paris"})],
    ),
    ("[get_weather(days=3.5loud=False)]", [("get_weather", {"days": 3.5, "loud": False})]),
    # no brackets: the whole reply is the calls (tools known)
    (
        'get_weather(city="Paris"), get_weather(city=Lyon, days=2)',
        [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lyon", "days": 2})],
    ),
    ("<|python_start|>get_weather(city=Paris)<|python_end|>", [("get_weather", {"city": "Paris"})]),
    # Llama 4 ends a message of calls with <|eom|>, as SGLang's template writes it
    ("get_weather(city=Paris, days=3)<|eom|>", [("get_weather", {"city": "Paris", "days": 3})]),
]


@pytest.mark.parametrize(("reply", "calls"), LOOSE)
def test_loose_values_are_read_and_named(reply: str, calls: list[Any]) -> None:
    whole, codes = _read("pythonic", reply)
    got = _calls(whole)
    assert [n for n, _ in got] == [n for n, _ in calls]
    for (_, args), (_, want) in zip(got, calls, strict=True):
        assert {k: args[k] for k in want} == want
    assert whole.content == ""
    assert "recovered-python-values" in codes
    for size in (1, 2, 3, 7):
        assert _calls(_read("pythonic", reply, size)[0]) == got, size


@pytest.mark.parametrize(("reply", "calls"), LOOSE)
def test_strict_reads_no_loose_value(reply: str, calls: list[Any]) -> None:
    result, codes = _read("pythonic", reply, strict=True)
    # (the family's end token where the reply ends is where the turn stopped, not text)
    assert result.calls == [] and result.content == reply.removesuffix("<|eom|>")
    assert "recovered-python-values" not in codes


def test_lfm2_reads_loose_values_inside_its_tags() -> None:
    reply = "<|tool_call_start|>[get_weather(city=Paris, days=3)]<|tool_call_end|>"
    result, codes = _read("lfm2", reply)
    assert _calls(result) == [("get_weather", {"city": "Paris", "days": 3})]
    assert codes == ["recovered-python-values"]
    assert _read("lfm2", reply, strict=True)[0].calls == []


def test_well_formed_calls_need_no_notice() -> None:
    reply = "[get_weather(city='Paris', days=3), get_weather(city=\"Lyon\")]"
    result, codes = _read("pythonic", reply)
    assert len(result.calls) == 2 and codes == []
    bare, codes = _read("pythonic", "get_weather(city='Paris')")
    assert len(bare.calls) == 1 and codes == []
    ended, codes = _read("pythonic", "[get_weather(city='Paris')]<|eom|>")
    assert len(ended.calls) == 1 and ended.content == "" and codes == []
    after, _ = _read("pythonic", "[get_weather(city='Paris')]<|eom|> and more")
    assert after.calls == [] and after.content == "[get_weather(city='Paris')]<|eom|> and more"


@pytest.mark.parametrize(
    "reply",
    [
        "Hello world",  # prose
        'print("hi")',  # no declared tool
        "get_weather is what I would call",
        "get_weather(city='Paris') is the call I would make.",  # text after the calls
        "get_weather(city='Paris')]",
    ],
)
def test_bare_text_that_is_not_only_calls_is_text(reply: str) -> None:
    result, _ = _read("pythonic", reply)
    assert result.calls == [] and result.content == reply
    for size in (1, 3):
        assert _read("pythonic", reply, size)[0].content == reply


def test_bare_calls_need_the_tools() -> None:
    # without the declared tools nothing tells a bare call from prose: it stays text
    reply = "get_weather(city='Paris')"
    assert _read("pythonic", reply, tools=None)[0].calls == []


@pytest.mark.parametrize(
    "reply",
    [
        "[get_weather(city=[Paris, Lyon])]",  # inside a list, values are literals
        "[get_weather(city=r'a')]",  # a string's prefix
        "[get_weather(city=)]",  # no value at all
        "[get_weather(city=, days=3)]",
        "[get_weather(days=" + "1" * 100 + ")]",  # too long for a number
    ],
)
def test_what_a_literal_cannot_be_told_from_is_not_read(reply: str) -> None:
    result, codes = _read("pythonic", reply)
    assert result.calls == [] and result.content == reply
    assert "call-not-read" in codes


def test_a_loose_reading_waits_on_little_text() -> None:
    # the decision at a quote or comma looks a bounded way ahead (LOOK_AHEAD): a long value
    # after an unescaped quote streams on as it comes, it is not held until the value ends
    reply = '[get_weather(city="a"' + "x" * 5_000 + '", days=3)]'
    stream = get_family("pythonic").stream(TOOLS)
    streamed = ""
    for k in range(0, len(reply) - 20, 100):  # all but the value's end
        streamed += "".join(
            e.text for e in stream.feed(reply[k : k + 100]) if isinstance(e, CallArgsDelta)
        )
    assert streamed.startswith('{"city": "a\\"x') and streamed.count("x") >= 5_000 - 20 - LOOK_AHEAD
    stream.feed(reply[k + 100 :])
    (call,) = assemble(stream.finish()).calls
    assert call.arguments == {"city": 'a"' + "x" * 5_000, "days": 3}
