"""A call's arguments streamed as they come, typed all the same: the writer, the pipeline.

The promise: the pieces a call's arguments stream in concatenate to the text the call ends
with — the typed text of a call that fits its schema, the text as written of one that does
not — however the model's text is cut, and what goes out early is only what typing cannot
change. Checked on the writer (:mod:`toolwire.arguments.streamed`), through the pipeline's
end on a real upstream's native deltas, and on every family's sample calls.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from toolwire.arguments.streamed import ArgumentWriter
from toolwire.backends import OpenAIBackend
from toolwire.events import CallAbort, CallArgsDelta, CallEnd, CallStart, Done, Event, Notice
from toolwire.events import TextDelta as Text
from toolwire.formats.registry import families
from toolwire.messages import ToolCall
from toolwire.pipeline import ModelMemory, Plan, Request, stream_sync
from toolwire.pipeline.end import End, prepare_call
from toolwire.pipeline.repeats import Repeats
from toolwire.pipeline.reply import read
from toolwire.testing import FakeOpenAIServer, tool_call_deltas

from .work_count import calls_made

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "where"},
        "content": {"type": "string"},
        "mode": {"type": "integer"},
        "force": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "kind": {"type": "string", "enum": ["note", "log"]},
        "maybe": {"type": ["string", "null"]},
    },
    "required": ["path"],
}
TOOLS = [{"type": "function", "function": {"name": "write", "parameters": SCHEMA}}]

#: What models write, and what they slip into.
WRITTEN = [
    '{"path": "a/b\\"c", "mode": 3}',
    '{"path":"x","content":"one\\ntwo\\ttab \\u00e9 \\ud83d\\ude00 \\\\ back"}',
    "{'path': 'it\\'s', 'content': 'a \"quote\"',}",
    '{"path": "raw\nline", "force": true, "tags": ["a", "b"]}',
    '{"path": "p", "mode": "3", "content": "after a typed field"}',
    '{"path": "p", "unknown": {"x": 1}, "content": "after a dropped field"}',
    '{"path": "p", "kind": "NOTE", "content": "after an enum in the wrong case"}',
    '{"path": "p", "maybe": null, "content": "c"}',
    '{"path": "p", "maybe": "null", "mode": 7}',
    '{"content": "no path: does not fit"}',
    '{"path": "p", "mode": "many"}',
    '{"path": "stray \\q backslash"}',
    '{"path": "cut sho',
    '{"path": "p", "force": True}',
    '  {"path": "leading space", "mode": 1.0}',
    '{"path": "\\ud800 lone"}',
    '"{\\"path\\": \\"string-encoded\\"}"',
    '["not", "an", "object"]',
    '{"arguments": {"path": "an envelope"}}',
    "{}",
    '{"path": "p"}{"content": "joined"}',
    '{"path": "p", /* comment */ "mode": 2}',
]


def _final(raw: str, schema: dict[str, Any] | None, strict: bool = False) -> str:
    end, _ = prepare_call(CallEnd(0, ToolCall("c", "write", {}, raw)), schema, strict=strict)
    return end.arguments or ""


def _streamed(raw: str, size: int, schema: dict[str, Any] | None, strict: bool = False) -> str:
    writer = ArgumentWriter(schema, strict=strict)
    sent = "".join(writer.feed(raw[i : i + size]) for i in range(0, len(raw), size))
    final = _final(raw, schema, strict)
    rest = writer.finish(final)
    assert rest is not None, (raw, sent, final)
    return sent + rest


@pytest.mark.parametrize("raw", WRITTEN)
@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_the_pieces_concatenate_to_the_final_text(raw: str, strict: bool) -> None:
    final = _final(raw, SCHEMA, strict)
    for size in (1, 2, 3, 7, len(raw)):
        assert _streamed(raw, size, SCHEMA, strict) == final


def test_a_text_value_streams_as_it_comes_and_escaped_as_json_writes_it() -> None:
    writer = ArgumentWriter(SCHEMA)
    assert writer.feed('{"pa') == "{"
    assert writer.feed('th": "a') == '"path": "a'
    assert writer.feed("b\\") == "b"  # an escape cut by the piece's end waits for its end
    assert writer.feed("n\t") == "\\n\\t"  # the raw tab as the final text writes it
    assert writer.feed("'") == "'"


def test_single_quotes_and_trailing_commas_are_repaired_as_they_stream() -> None:
    writer = ArgumentWriter(SCHEMA)
    sent = writer.feed("{'path': 'it\\'s \"x\"', ")
    assert sent == '{"path": "it\'s \\"x\\""'
    assert writer.feed("}") == ""  # the closing brace comes with the rest, at the end
    assert writer.finish('{"path": "it\'s \\"x\\""}') == "}"


def test_a_value_typing_may_change_is_held_until_complete() -> None:
    writer = ArgumentWriter(SCHEMA)
    assert writer.feed('{"path": "p", "mode": 64') == '{"path": "p"'
    assert writer.feed("4, ") == ', "mode": 644'  # complete, and an integer as it is
    assert writer.feed('"tags": ["a", ') == ""
    assert writer.feed('"b"]') == ', "tags": ["a", "b"]'


def test_from_the_first_field_typing_changes_the_call_is_held_to_its_end() -> None:
    for field in ('"mode": "3"', '"extra": 1', '"kind": "NOTE"', '"force": "true"'):
        writer = ArgumentWriter(SCHEMA)
        sent = writer.feed('{"path": "p", ' + field + ', "content": "long text"')
        assert sent == '{"path": "p"', field


def test_a_schema_not_typed_field_by_field_gives_only_the_brace() -> None:
    schema = {"anyOf": [SCHEMA, {"type": "object"}]}
    writer = ArgumentWriter(schema)
    assert writer.feed('{"path": "p", "content": "c"') == "{"
    assert ArgumentWriter(None).feed('{"path": "p"') == ""  # no schema: all at the end
    assert ArgumentWriter(SCHEMA).feed('["p"]') == ""  # no object: nothing early


def test_a_key_given_twice_cannot_be_extended() -> None:
    raw = '{"path": "first", "path": "second"}'
    writer = ArgumentWriter(SCHEMA)
    assert writer.feed(raw) == '{"path": "first"'
    assert writer.finish(_final(raw, SCHEMA)) is None  # the caller resends it whole


def test_the_writer_is_linear_in_the_arguments_length() -> None:
    """A long file's content in 3-character pieces: the work grows with the length, not its
    square. Counted, not timed (see :mod:`tests.work_count`): the calls the feeding makes."""

    def run(n: int) -> int:
        raw = json.dumps({"path": "big.txt", "content": 'ab\\c"d\n' * n})
        writer = ArgumentWriter(SCHEMA)
        sent, calls = calls_made(
            lambda: "".join(writer.feed(raw[i : i + 3]) for i in range(0, len(raw), 3))
        )
        assert sent + (writer.finish(_final(raw, SCHEMA)) or "") == _final(raw, SCHEMA)
        return calls

    small, large = run(20_000), run(80_000)
    assert large < small * 6, (small, large)  # four times the text: linear 4x, quadratic 16x


# -- through the pipeline's end: a real upstream's native deltas


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def _events(server: FakeOpenAIServer, arguments: str) -> list[Event]:
    server.add_stream(
        tool_call_deltas([("call_1", "write", arguments)], size=4), finish_reason="tool_calls"
    )
    backend = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    ask = [{"role": "user", "content": "write"}]
    return list(stream_sync(backend.stream(Request(ask, TOOLS))))


def _joined(events: list[Event], index: int) -> str:
    return "".join(e.text for e in events if isinstance(e, CallArgsDelta) and e.index == index)


@pytest.mark.parametrize(
    "arguments",
    [
        '{"path": "p", "content": "' + "x" * 200 + '", "mode": "7"}',
        '{"content": "does not fit: no path"}',
        '{"path": "p", "gone": 1}',
    ],
)
def test_the_pipeline_streams_a_native_call_typed(server: FakeOpenAIServer, arguments: str) -> None:
    events = _events(server, arguments)
    (end,) = [e for e in events if isinstance(e, CallEnd)]
    deltas = [e for e in events if isinstance(e, CallArgsDelta)]
    assert _joined(events, end.index) == end.arguments
    assert len(deltas) > 1  # streamed, not given whole at the end
    first = events.index(deltas[0])
    assert isinstance(events[first - 1], CallStart)  # the call opens with its first byte


def test_a_call_changed_after_it_streamed_is_withdrawn_and_resent(server: FakeOpenAIServer) -> None:
    events = _events(server, '{"path": "first", "content": "c", "path": "second"}')
    (abort,) = [e for e in events if isinstance(e, CallAbort)]
    (end,) = [e for e in events if isinstance(e, CallEnd)]
    assert "call-resent" in [e.code for e in events if isinstance(e, Notice)]
    assert end.index != abort.index and end.call.id != abort.id
    assert json.loads(end.arguments or "") == {"path": "second", "content": "c"}
    assert _joined(events, end.index) == end.arguments
    assert not _joined(events, abort.index).endswith("}")  # what went out never closes
    assert events[-1] == Done("tool_calls", None)


# -- every family's calls, read from text as it comes


async def _pieces(text: str, size: int) -> AsyncIterator[Event]:
    for i in range(0, len(text), size):
        yield Text(text[i : i + size])
    yield Done("stop")


async def _through(family: Any, text: str, size: int) -> list[tuple[int, Event]]:
    """The events the pipeline's end gives, each with the number of pieces fed by then."""
    request = Request([{"role": "user", "content": "write"}], TOOLS)
    end = End(request)
    fed = 0

    async def counted() -> AsyncIterator[Event]:
        nonlocal fed
        async for event in _pieces(text, size):
            fed += 1
            yield event

    out: list[tuple[int, Event]] = []
    async for event in read(counted(), Plan("grammar", family=family), request):
        out += [(fed, e) for e in end.push(event)]
    return out


@pytest.mark.parametrize("family", families(), ids=lambda f: f.name)
def test_every_family_streams_its_calls_typed(family: Any) -> None:
    args = {"path": "notes/a.md", "content": "a longer text " * 8, "mode": 7}
    text = family.sample(0, "write", args)
    got = asyncio.run(_through(family, text, 4))
    ends = [e for _, e in got if isinstance(e, CallEnd)]
    assert len(ends) == 1, (family.name, text)
    (end,) = ends
    assert json.loads(end.arguments or "") == args
    events = [e for _, e in got]
    assert _joined(events, end.index) == end.arguments
    # the first argument bytes go out within a piece of the family's reader giving them
    # (a family whose reader holds a call to its end, as its peers do, gives them there)
    first = next(n for n, e in got if isinstance(e, CallArgsDelta))
    reader = family.stream(TOOLS)
    read_at = next(
        n
        for n, i in enumerate(range(0, len(text), 4), start=1)
        if any(isinstance(e, CallArgsDelta) for e in reader.feed(text[i : i + 4]))
    )
    assert first <= read_at + 1, (family.name, first, read_at)
    last = next(n for n, e in got if isinstance(e, CallEnd))
    assert first < last or read_at >= last - 1, family.name


# -- a call to a tool just called: held only while it may be a repeat

ANSWERED = [
    {"role": "user", "content": "write two files"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "write", "arguments": '{"path": "a.md", "content": "A"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "written"},
]


def _after_answer(server: FakeOpenAIServer, arguments: str) -> list[Event]:
    deltas = tool_call_deltas([("call_1", "write", arguments)], size=4)
    server.add_stream(deltas, finish_reason="tool_calls")
    server.add_stream([{"content": "Done."}])  # the retry, when the call was a repeat
    backend = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    return list(stream_sync(backend.stream(Request(ANSWERED, TOOLS))))


def test_a_call_to_the_tool_just_called_streams_once_it_cannot_be_a_repeat(
    server: FakeOpenAIServer,
) -> None:
    other = '{"path": "b.md", "content": "' + "the second file " * 10 + '"}'
    # the repeat check alone: what it gives on before the call ends
    repeats = Repeats(Request(ANSWERED, TOOLS))
    early = repeats.push(CallStart(0, "call_1", "write"))
    for i in range(0, len(other), 4):
        early += repeats.push(CallArgsDelta(0, other[i : i + 4]))
    assert early and isinstance(early[0], CallStart)  # passed on before its end
    assert "".join(e.text for e in early if isinstance(e, CallArgsDelta)) == other
    held_for = next(i for i, e in enumerate(early) if isinstance(e, CallArgsDelta))
    assert held_for == 1  # the held pieces go on together once "b.md" parts it
    # and through the whole pipeline: the pieces join to the typed call, no notice
    events = _after_answer(server, other)
    (end,) = [e for e in events if isinstance(e, CallEnd)]
    assert _joined(events, end.index) == end.arguments
    assert not [e for e in events if isinstance(e, Notice) and e.code == "repeated-call"]


def test_the_call_just_answered_written_again_never_streams(server: FakeOpenAIServer) -> None:
    same = '{"path": "a.md", "content": "A"}'
    repeats = Repeats(Request(ANSWERED, TOOLS))
    out = repeats.push(CallStart(0, "call_1", "write"))
    for i in range(0, len(same), 4):
        out += repeats.push(CallArgsDelta(0, same[i : i + 4]))
    assert out == []  # it may be the repeat until its end
    events = _after_answer(server, same)
    assert not [e for e in events if isinstance(e, (CallStart, CallArgsDelta, CallEnd))]
    assert "repeated-call" in [e.code for e in events if isinstance(e, Notice)]
