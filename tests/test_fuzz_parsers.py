"""A fuzz campaign over every stream parser, the drift reader and the argument reader.

Each parser is fed arbitrary text made of its own grammar (its markers and special tokens,
pieces of the replies its own tests read), the thinking markers, JSON fragments, any unicode
(lone surrogates too), numbers too large for a float or for ``int()``, and nesting at and past
the depth limits, cut into arbitrary chunks. What the parsers promise, and is checked here:

- only the documented errors leave them: a reply stream raises :class:`LimitError` past its
  ``max_chars`` and :class:`UsageError` when fed after ``finish()``, and nothing else, whatever
  the text; :func:`recover_calls` and :class:`DriftGuard` raise nothing; :func:`read_json`
  raises :class:`ReadError` only;
- the events are well formed: every call starts once, gets argument text only while open,
  and ends or aborts exactly once; an ended call's argument text is the JSON of its arguments;
- chunked feeding gives what whole feeding gives (:mod:`toolwire.formats.base` promises it);
- nothing is invented: reply text and reasoning are each made of the reply's own characters,
  in order; and nothing is lost: a reply with no call and no thinking is its own text, every
  character of it (markup that is not a call stays text), except in the grammars that name
  tokens they drop (:data:`DROPS_TOKENS`);
- the work stays linear, counted, not timed (:func:`_work`), on the replies that were found
  quadratic; elsewhere the inputs are bounded and the parsers' own limits do the rest.

The parsers are every family in the registry (so a new family is fuzzed as soon as it is
registered), the reader for tools in words, and grammars learned from templates
(:data:`DERIVED`). Every example is seeded (``derandomize``) and the file runs in well under a
minute.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire import LimitError, UsageError
from toolwire.arguments.read import MAX_ARGUMENT_DEPTH, ReadError, read_json
from toolwire.events import (
    Event,
    ReasoningDelta,
    TextDelta,
)
from toolwire.formats import reasoning
from toolwire.formats.base import Family, assemble
from toolwire.formats.drift import DriftGuard
from toolwire.formats.recovery import recover_calls

from .fuzz_material import (
    _CUTS,
    _HOSTILE_VALUES,
    _NUMBERS,
    _ODD_TEXT,
    _REPLIES,
    _THINKING,
    _UNICODE,
    DROPS_TOKENS,
    PARSERS,
    _cut,
    _finite,
    _has_markup,
    _ids,
    _in_order,
    _stream,
    _strict_json,
    check_events,
)
from .replies import TOOLS

# ------------------------------------------------------------------------------ the campaign

_SETTINGS = settings(
    derandomize=True,
    database=None,
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("name", sorted(PARSERS))
@_SETTINGS
@given(data=st.data())
def test_any_text_in_any_chunks(name: str, data: st.DataObject) -> None:
    family = PARSERS[name]
    reply = data.draw(_REPLIES[name], label="reply")
    chunks = _cut(reply, data.draw(_CUTS, label="cuts"))
    tools = data.draw(st.sampled_from([TOOLS, None]), label="tools")
    kw = {
        "reasoning_open": data.draw(st.booleans(), label="reasoning_open"),
        "strict": data.draw(st.booleans(), label="strict"),
    }
    whole = family.parse(reply, tools, make_id=_ids, **kw)
    events = _stream(family, chunks, tools, **kw)
    check_events(events)
    assert assemble(events) == whole
    assert _in_order(whole.content, reply)
    assert _in_order(whole.reasoning, reply)
    if whole.calls or kw["reasoning_open"]:
        return
    text = _as_text(family, reply)
    if name not in DROPS_TOKENS and not any(m in reply for m in _THINKING):
        assert whole.content == text  # markup that is no call stays text, all of it
    elif not _has_markup(reply, name):
        assert whole.content == text


def _as_text(family: Family, reply: str) -> str:
    """``reply`` as reply text: all of it, less the family's end-of-turn token where it ends
    the reply (where the turn stopped, not text)."""
    stripped = reply.rstrip(" \t\r\n")
    for token in getattr(family.stream_class, "turn_ends", ()):
        if token and stripped.endswith(token):
            return stripped[: -len(token)]
    return reply


_PLAIN = st.lists(
    st.one_of(
        st.sampled_from([*_ODD_TEXT, *_NUMBERS[:2], "Hello, world.", "a: b", "é", '"', "'"]),
        _UNICODE,
    ),
    max_size=12,
).map("".join)


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(derandomize=True, database=None, max_examples=25, deadline=None)
@given(text=_PLAIN, cuts=_CUTS, tools=st.sampled_from([TOOLS, None]))
def test_plain_text_passes_through_whole(
    name: str, text: str, cuts: list[int] | None, tools: Any
) -> None:
    # Text holding no markup at all is the reply's text, every character, in every grammar.
    events = _stream(PARSERS[name], _cut(text, cuts), tools)
    result = assemble(events)
    assert result.content == text and not result.calls and not result.reasoning
    assert [e for e in events if not isinstance(e, TextDelta)] == []


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(derandomize=True, database=None, max_examples=15, deadline=None)
@given(data=st.data())
def test_the_reply_limit_is_the_only_error(name: str, data: st.DataObject) -> None:
    family = PARSERS[name]
    reply = data.draw(_REPLIES[name], label="reply")
    limit = data.draw(st.integers(0, len(reply) + 2), label="max_chars")
    chunks = _cut(reply, data.draw(_CUTS, label="cuts"))
    if len(reply) > limit:
        with pytest.raises(LimitError):
            family.parse(reply, TOOLS, max_chars=limit)
    else:
        family.parse(reply, TOOLS, max_chars=limit)
    s = family.stream(TOOLS, max_chars=limit)
    fed = 0
    for chunk in chunks:
        fed += len(chunk)
        if fed > limit:  # the chunk that passes the limit is refused, none before it
            with pytest.raises(LimitError):
                s.feed(chunk)
            return
        s.feed(chunk)
    s.finish()
    assert s.finish() == []
    with pytest.raises(UsageError):
        s.feed("more")


# ------------------------------------------------------------------------------ drift


@settings(derandomize=True, database=None, max_examples=400, deadline=None)
@given(
    text=_REPLIES["words"],
    cuts=_CUTS,
    lenient=st.booleans(),
    was_cut=st.booleans(),
    repeats=st.booleans(),
)
def test_drift_recovery_reads_only_calls_to_declared_tools(
    text: str, cuts: list[int] | None, lenient: bool, was_cut: bool, repeats: bool
) -> None:
    found = recover_calls(text, TOOLS, lenient=lenient, cut=was_cut, repeats=repeats)
    if found is not None:
        calls, _shape = found
        assert calls
        for name, arguments, raw in calls:
            assert name in {"get_weather", "write_file", "set_flags"}
            assert isinstance(arguments, dict) and _strict_json(raw) == arguments
    assert recover_calls(text, None) is None  # no tools declared: nothing is recovered
    for release_on_start in (False, True):
        guard = DriftGuard(TOOLS, make_id=_ids, release_on_start=release_on_start)
        events: list[Event] = [ReasoningDelta("thinking")]
        for piece in _cut(text, cuts):
            if piece:
                events += guard.push([TextDelta(piece)])
        events += guard.end(cut=was_cut)
        check_events(events)
        result = assemble(events)
        assert result.reasoning == "thinking"
        if not result.calls:
            assert result.content == text  # held text is released whole


# ------------------------------------------------------------------------------ arguments


@settings(derandomize=True, database=None, max_examples=600, deadline=None)
@given(
    text=st.one_of(_REPLIES["hermes"], _REPLIES["words"], _HOSTILE_VALUES),
    strict=st.booleans(),
    max_depth=st.sampled_from([1, 5, MAX_ARGUMENT_DEPTH]),
    max_chars=st.sampled_from([10, 1000, 4 * 1024 * 1024]),
)
def test_the_argument_reader_raises_only_read_errors(
    text: str, strict: bool, max_depth: int, max_chars: int
) -> None:
    try:
        result = read_json(text, strict=strict, max_depth=max_depth, max_chars=max_chars)
    except ReadError as exc:
        assert str(exc)
        return
    assert len(text) <= max_chars
    assert _finite(result.value)
    assert not (strict and result.repairs)
    json.dumps(result.value)  # a value JSON can write: no NaN smuggled, no odd types


# ------------------------------------------------------------------------------ linear work

_FORMATS_DIR = inspect.getfile(reasoning).rsplit("/", 1)[0]
#: ``str`` methods that take a start position: what they read is not the string's length.
_POSITIONED = {"find", "rfind", "index", "rindex", "count", "startswith", "endswith"}


def _work(family: Family, reply: str, chunk: int) -> int:
    """How many characters the parser's own code looks at while streaming ``reply``.

    Counted, not timed: every ``str`` method the formats' code calls is charged the length
    of the string it is called on (but for the searches given where to start, which a
    profiler cannot see), and every search of the shared scanners (a marker's,
    ``Markers.scan``; a name's, ``NameReader``) the text from where it started to where it
    stopped looking.
    """
    seen = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal seen
        code = frame.f_code
        if event == "c_call" and code.co_filename.startswith(_FORMATS_DIR):
            receiver = getattr(arg, "__self__", None)
            if isinstance(receiver, str) and arg.__name__ not in _POSITIONED:
                seen += len(receiver)
        elif event == "return" and code.co_name == "scan" and code.co_filename.endswith("scan.py"):
            j, marker = arg
            local = frame.f_locals
            seen += (j + len(marker) if marker else local["stop"]) - local["start"]
        elif (
            event == "return"
            and code.co_name == "_look"
            and code.co_filename.endswith("textargs.py")
        ):
            local = frame.f_locals
            m = local["m"]
            seen += (m.end() if m is not None else local["end"]) - local["i"]

    s = family.stream(TOOLS)
    sys.setprofile(profile)
    try:
        for i in range(0, len(reply), chunk):
            s.feed(reply[i : i + chunk])
        s.finish()
    finally:
        sys.setprofile(None)
    return seen


#: Replies once quadratic, each found by this campaign.
QUADRATIC = [
    # many call markers, each opening a name whose end never comes: the name's end was looked
    # for in all the text left, once per marker (every family reading names: LFM2, Gemma 4,
    # Functionary, GLM, MiniMax, Solar, the learned grammars...)
    pytest.param(
        "lfm2", lambda n: "<|tool_call_start|>[get_weather(cit" * (n // 35), 10**6, id="lfm2-name"
    ),
    pytest.param("functionary-v3.1", lambda n: "<function=" * (n // 10), 10**6, id="v3.1-name"),
    pytest.param(
        "functionary-v3.2", lambda n: ">>>get_weather" * (n // 14), 10**6, id="v3.2-recipient"
    ),
    pytest.param("functionary-v3.2", lambda n: ">" * n, 10**6, id="v3.2-markers"),
    # header openers with no header end: the end was looked for in all the text left
    pytest.param("gpt-oss", lambda n: "<|channel|>" * (n // 11), 10**6, id="harmony-header"),
    pytest.param("glimmer", lambda n: "<|start|>" * (n // 9), 10**6, id="glimmer-header"),
    pytest.param(
        "kimi-k3",
        lambda n: "<|open|>tools<|sep|>" + '<|open|>call tool="f' * (n // 20),
        10**6,
        id="kimi-k3-attributes",
    ),
    # a reply of blanks streamed in small pieces: MiniMax M3 joined and stripped all of them
    # again for each piece, while it waited to see whether thinking opens the reply
    pytest.param("minimax-m3", lambda n: "\u2028" * n, 7, id="minimax-m3-blanks"),
    pytest.param("minimax-m3", lambda n: " " * n, 7, id="minimax-m3-spaces"),
    # loose Python values: each quote, comma or parenthesis looks a bounded way ahead
    pytest.param(
        "pythonic", lambda n: '[get_weather(city="' + '"x' * (n // 2), 7, id="pythonic-quotes"
    ),
    pytest.param(
        "pythonic", lambda n: "[get_weather(city=a" + ", x" * (n // 3), 7, id="pythonic-commas"
    ),
    pytest.param("pythonic", lambda n: "[get_weather(city=a" + "(" * n, 7, id="pythonic-parens"),
    pytest.param(
        "pythonic", lambda n: "get_weather(city=a), " * (n // 21), 7, id="pythonic-bare-calls"
    ),
    # a whole reply's call after white space, or white space after it, in small pieces: the
    # whole-reply layer joined all it held again for each piece
    pytest.param(
        "llama3", lambda n: " " * n + '{"name": "get_weather", "parameters": {}}', 3, id="lead"
    ),
    # DSML's tolerances: damaged block tags one after another, markup in a long code fence,
    # invokes closed in their own tags, arguments as JSON objects
    pytest.param("deepseek-dsml", lambda n: "<｜DSML｜toolcalls" * (n // 17), 3, id="dsml-damaged"),
    pytest.param(
        "deepseek-dsml",
        lambda n: "```\n" + '<｜DSML｜invoke name="get_weather">x\n' * (n // 35),
        3,
        id="dsml-fenced",
    ),
    pytest.param(
        "deepseek-dsml",
        lambda n: "<｜DSML｜tool_calls>" + '<｜DSML｜invoke name="get_weather"/>' * (n // 35),
        3,
        id="dsml-self-closed",
    ),
    pytest.param(
        "minimax",
        lambda n: '<minimax:tool_call><invoke name="get_weather">{"a": [' + "[1], " * (n // 5),
        3,
        id="minimax-json-body",
    ),
    # MiniMax M3's nested elements: deep, and many siblings
    pytest.param(
        "minimax-m3",
        lambda n: (
            ']<]minimax[>[<tool_call>]<]minimax[>[<invoke name="get_weather">'
            + "]<]minimax[>[<a>" * (n // 16)
        ),
        3,
        id="m3-deep",
    ),
    pytest.param(
        "minimax-m3",
        lambda n: (
            ']<]minimax[>[<tool_call>]<]minimax[>[<invoke name="get_weather">]<]minimax[>[<v>'
            + "]<]minimax[>[<item>1]<]minimax[>[</item>" * (n // 40)
        ),
        3,
        id="m3-items",
    ),
    pytest.param(
        "llama3", lambda n: '{"name": "get_weather", "parameters": {}}' + " " * n, 3, id="after"
    ),
    # a list of call objects in one tag, long; a tool's output never closed; a closer
    # written again and again after a block; a block opened again and again
    pytest.param(
        "hermes",
        lambda n: "<tool_call>[" + '{"name": "get_weather", "arguments": {}}, ' * (n // 43),
        3,
        id="hermes-list",
    ),
    pytest.param("hermes", lambda n: "<tool_response>" + "x " * (n // 2), 3, id="tool-output"),
    pytest.param(
        "hermes",
        lambda n: (
            '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'
            + "</tool_call>\n" * (n // 13)
        ),
        3,
        id="closer-again",
    ),
    pytest.param(
        "deepseek-v3.1",
        lambda n: (
            "<｜tool▁calls▁begin｜>"
            + (
                "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
                "<｜tool▁calls▁begin｜>"
            )
            * (n // 60)
        ),
        3,
        id="block-reopened",
    ),
    pytest.param(
        "glm",
        lambda n: "<tool_call>[" + '{"name": "x", "arguments": {}}, ' * (n // 32),
        3,
        id="glm-json",
    ),
]


@pytest.mark.parametrize(("name", "reply", "chunk"), QUADRATIC)
def test_work_is_linear_on_the_replies_once_quadratic(
    name: str, reply: Callable[[int], str], chunk: int
) -> None:
    family = PARSERS[name]
    small, large = reply(3_000), reply(12_000)
    ratio = _work(family, large, chunk) / max(1, _work(family, small, chunk))
    # four times the text: about four times the work (quadratic work would be sixteen)
    assert ratio < 4 * 1.5, ratio
    assert _work(family, large, chunk) < 40 * len(large)


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_work_is_linear_for_every_marker_repeated(name: str) -> None:
    # Each of the grammar's markers, written again and again: the work grows with the text.
    family = PARSERS[name]
    for marker in family.markers:
        small, large = marker * (2_000 // len(marker)), marker * (8_000 // len(marker))
        for chunk in (5, 1_000_000):
            ratio = _work(family, large, chunk) / max(1, _work(family, small, chunk))
            assert ratio < 4 * 1.5, (marker, chunk, ratio)


# ------------------------------------------------------------------------------ regressions


def test_kimi_k2_call_broken_after_its_arguments_is_not_also_a_call() -> None:
    # The call's JSON was whole, then the section ended with no <|tool_call_end|>: the call
    # broke and was aborted, its text given back as reply text, yet it also ended as a call
    # (CallAbort, then CallEnd for the same index): one text both shown and run.
    reply = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_calls_section_end|>'
    )
    for chunks in ([reply], list(reply)):
        events = _stream(PARSERS["kimi-k2"], chunks, TOOLS)
        check_events(events)
        result = assemble(events)
        assert result.calls == [] and result.content == reply


def test_kimi_k2_refuses_a_reply_past_its_limit_while_it_holds_a_piece_back() -> None:
    # Kimi K2 holds back a piece that may begin a call token (thinking may still end there)
    # and counted it against the limit only once it passed it on: a reply over the limit was
    # refused by a later call, or by finish(), instead of by the feed that passed the limit.
    s = PARSERS["kimi-k2"].stream(TOOLS, max_chars=3)
    s.feed("ab")
    with pytest.raises(LimitError):
        s.feed("<|")
    with pytest.raises(LimitError):  # refused once, refused from then on
        s.feed("")
