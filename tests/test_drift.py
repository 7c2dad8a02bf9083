"""Drift recovery: calls written in a shape the family's grammar does not read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from toolwire import get_family
from toolwire.backends import OpenAIBackend, Request, stream_sync
from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.chat import demo_toolbox
from toolwire.conversation import Conversation
from toolwire.events import CallEnd, Done, Notice, TextDelta, ToolResult, ToolRun
from toolwire.formats.base import assemble
from toolwire.formats.drift import DriftGuard
from toolwire.formats.recovery import recover_calls
from toolwire.loop import run_loop_sync
from toolwire.messages import ToolCall
from toolwire.testing import FakeOpenAIServer, text_deltas

from .prepared import typed
from .replies import TOOLS

CALL = {"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}
BARE = json.dumps(CALL)

RECOVERED = [
    (BARE, "bare-json"),
    ("  \n" + json.dumps(CALL, indent=2) + "\n", "bare-json"),
    (json.dumps({"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}), "bare-json"),
    ("```json\n" + json.dumps(CALL, indent=2) + "\n```", "fenced-json"),
    ("```\n" + BARE + "\n```\n", "fenced-json"),
    ("<tool_call>\n" + BARE, "unclosed-tag"),
    (json.dumps({"type": "function", **CALL}), "bare-json"),
    ("{" + BARE + "}", "doubled-braces"),
    ("```json\n{" + json.dumps(CALL, indent=2) + "}\n```", "doubled-braces"),
]


@pytest.mark.parametrize(
    "text",
    [
        "The call is {" + BARE + "}.",  # inside prose: never a call
        "{" + BARE + "} and then some",
        "{{" + BARE + "}}",  # tripled: not a shape any template teaches
        '{{"name": "nope", "arguments": {}}}',  # not a declared tool
    ],
)
def test_doubled_braces_only_around_a_whole_reply_call(text: str) -> None:
    assert recover_calls(text, TOOLS) is None


@pytest.mark.parametrize(("text", "shape"), RECOVERED)
def test_each_drift_shape_is_recovered(text: str, shape: str) -> None:
    found = recover_calls(text, TOOLS)
    assert found is not None
    calls, got_shape = found
    assert got_shape == shape
    ((name, arguments, raw),) = calls
    # the arguments as written (untyped), typed once by the argument pipeline
    written = {"city": "Paris", "days": 3 if '"days": 3' in text else "3"}
    assert (name, arguments) == ("get_weather", written) and json.loads(raw) == written
    assert typed(ToolCall("c", name, arguments, raw)) == {"city": "Paris", "days": 3}


def test_a_list_of_calls() -> None:
    text = json.dumps([CALL, {"name": "write_file", "arguments": {"path": "a", "content": "b"}}])
    found = recover_calls(text, TOOLS)
    assert found is not None and [n for n, _, _ in found[0]] == ["get_weather", "write_file"]


ROME = json.dumps({"name": "get_weather", "arguments": {"city": "Rome"}})


def test_calls_as_json_lines_and_a_call_repeated_is_one_call() -> None:
    found = recover_calls(f"{BARE}\n{ROME}\n", TOOLS)
    assert found is not None and found[1] == "json-lines"
    assert [a["city"] for _, a, _ in found[0]] == ["Paris", "Rome"]
    # a small model repeating its call until the token limit: the tool runs once
    found = recover_calls("```json\n" + f"{BARE}\n" * 4 + "```", TOOLS)
    assert found is not None and len(found[0]) == 1
    found = recover_calls(json.dumps([CALL, CALL, json.loads(ROME)]), TOOLS)
    assert found is not None and len(found[0]) == 2


def test_several_closed_tool_call_blocks_are_one_call_each() -> None:
    """A model's parallel calls as its template teaches them, left in the text by an engine
    that reads no tags: each block is a call, in order."""
    text = f"<tool_call>\n{BARE}\n</tool_call>\n<tool_call>\n{ROME}\n</tool_call>"
    found = recover_calls(text, TOOLS)
    assert found is not None and found[1] == "tagged"
    assert [a["city"] for _, a, _ in found[0]] == ["Paris", "Rome"]
    found = recover_calls(text.replace("\n", ""), TOOLS)  # no whitespace between them
    assert found is not None and len(found[0]) == 2


@pytest.mark.parametrize(
    "text",
    [
        f"<tool_call>{BARE}</tool_call> and <tool_call>{ROME}</tool_call>",  # words between
        f"<tool_call>{BARE}</tool_call><tool_call>{ROME}",  # the last one unclosed
        f"<tool_call>{BARE}<tool_call>{ROME}</tool_call>",  # one never closed
        f"<tool_call>{BARE}</tool_call><tool_call>Sorry.</tool_call>",  # not a call
        f"<tool_call>{BARE}</tool_call>\n<tool_call>"
        + json.dumps({"name": "launch_rockets", "arguments": {}})
        + "</tool_call>",
        "<tool_call>" * 50_000 + "</tool_call>",  # read in one pass, refused
        # one call each, read on its own: a call split over two blocks, an empty block, a
        # block of two calls are not replies of calls
        f"<tool_call>{BARE[:20]}</tool_call><tool_call>{BARE[20:]}</tool_call>",
        f"<tool_call>{BARE}</tool_call><tool_call></tool_call>",
        f"<tool_call>{BARE}\n{ROME}</tool_call><tool_call>{ROME}</tool_call>",
        f"<tool_call>{BARE}</tool_call><tool_call>[{ROME}]</tool_call>",
    ],
)
def test_tool_call_blocks_that_are_not_a_reply_of_calls(text: str) -> None:
    assert recover_calls(text, TOOLS) is None


@pytest.mark.parametrize("tail", [ROME[:-5], ROME[:25], ROME[:30], "{"])
def test_a_reply_cut_at_the_token_limit_keeps_its_complete_calls(tail: str) -> None:
    text = f"{BARE}\n{BARE}\n{tail}"
    assert recover_calls(text, TOOLS) is None  # not cut by the engine: not a reply of calls
    found = recover_calls(text, TOOLS, cut=True)
    assert found is not None and found[1] == "json-lines-cut"
    assert [(n, a) for n, a, _ in found[0]] == [("get_weather", CALL["arguments"])]


@pytest.mark.parametrize("tail", [ROME + " and more", '{"a" 1', "Sorry", "[1, 2"])
def test_after_a_cut_only_an_unfinished_call_may_follow(tail: str) -> None:
    assert recover_calls(f"{BARE}\n{tail}", TOOLS, cut=True) is None


@pytest.mark.parametrize(
    "text",
    [
        f"{BARE}\n{ROME[:-5]}",  # the last line cut short: not a whole reply of calls
        f"{BARE}\n{ROME}\nDone.",
        f"{BARE}\n" + json.dumps({"name": "launch_rockets", "arguments": {}}),
        f"{BARE}\n" + "[" * 5000,  # deep brackets after a call: refused, no RecursionError
        "\n".join(
            json.dumps({"name": "get_weather", "arguments": {"city": str(i)}}) for i in range(65)
        ),  # more lines than one reply may hold
    ],
)
def test_json_lines_that_are_not_calls(text: str) -> None:
    assert recover_calls(text, TOOLS) is None


@pytest.mark.parametrize(
    "text",
    [
        "Here you go: " + BARE,
        BARE + "\nI called the weather tool.",
        json.dumps({"name": "launch_rockets", "arguments": {}}),
        "Here is an example of a call:\n```json\n" + BARE + "\n```\nUse it like that.",
        json.dumps({"name": "get_weather", "arguments": {}, "extra": 1}),
        json.dumps({"name": "get_weather", "arguments": "Paris"}),
        "{'name': 'get_weather', 'arguments': {}}",  # not JSON: no guessing here
        "```python\nprint('hi')\n```",
        "Just words.",
    ],
)
def test_what_is_not_a_call(text: str) -> None:
    assert recover_calls(text, TOOLS) is None


def test_without_declared_tools_nothing_is_recovered() -> None:
    assert recover_calls(BARE, None) is None


def run_guarded(text: str, chunks: list[str], **kw: Any) -> list[Any]:
    # the family's ids too: a call it streamed and recovery then read keeps the family's id
    parser = get_family("hermes").stream(TOOLS, make_id=lambda i: f"call{i}", **kw)
    guard = DriftGuard(TOOLS, make_id=lambda i: f"id{i}")
    events: list[Any] = []
    for chunk in chunks:
        events += guard.push(parser.feed(chunk))
    events += guard.push(parser.finish()) + guard.end()
    return events


@pytest.mark.parametrize(("text", "_shape"), RECOVERED)
def test_recovery_however_the_reply_is_cut(text: str, _shape: str) -> None:
    whole = assemble(run_guarded(text, [text]))
    assert [c.name for c in whole.calls] == ["get_weather"] and whole.content == ""
    assert any(n.startswith("read a call") for n in whole.notices)
    for k in range(len(text) + 1):
        assert assemble(run_guarded(text, [text[:k], text[k:]])) == whole


def test_prose_streams_at_once_and_json_waits() -> None:
    parser = get_family("hermes").stream(TOOLS)
    guard = DriftGuard(TOOLS)
    assert guard.push(parser.feed("Sure")) == [TextDelta("Sure")]
    parser = get_family("hermes").stream(TOOLS)
    guard = DriftGuard(TOOLS)
    assert guard.push(parser.feed('{"name": "get_')) == []


def test_json_in_reasoning_is_never_a_call() -> None:
    text = "<think>\n" + BARE + "\n</think>\n\nIt is sunny."
    result = assemble(run_guarded(text, [text]))
    assert result.calls == [] and result.content == "It is sunny."


def test_a_real_call_is_not_second_guessed() -> None:
    text = "<tool_call>\n" + BARE + "\n</tool_call>"
    result = assemble(run_guarded(text, [text]))
    assert len(result.calls) == 1 and not result.notices


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def test_calls_left_in_content_by_a_server_are_recovered(server: FakeOpenAIServer) -> None:
    server.add_stream(text_deltas("```json\n" + BARE + "\n```", size=5))
    events = list(
        stream_sync(
            OpenAIBackend("m", base_url=server.base_url).stream(
                Request([{"role": "user", "content": "Paris?"}], TOOLS)
            )
        )
    )
    (end,) = [e for e in events if isinstance(e, CallEnd)]
    # typed once, at the pipeline's end; the text keeps what the model wrote
    assert end.call.arguments == typed(end.call) == {"city": "Paris", "days": 3}
    assert json.loads(end.call.arguments_text) == CALL["arguments"]
    assert end.arguments == '{"city": "Paris", "days": 3}'
    codes = [e.code for e in events if isinstance(e, Notice)]
    assert codes == ["recovered-fenced-json", "arguments-repaired"]
    assert events[-1] == Done("tool_calls", None)
    assert not [e for e in events if isinstance(e, TextDelta)]


def test_strict_turns_recovery_off(server: FakeOpenAIServer) -> None:
    server.add_stream(text_deltas(BARE))
    events = list(
        stream_sync(
            OpenAIBackend("m", base_url=server.base_url).stream(
                Request([{"role": "user", "content": "Paris?"}], TOOLS, strict=True)
            )
        )
    )
    assert not [e for e in events if isinstance(e, CallEnd)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == BARE


def test_the_default_model_through_the_loop(
    fresh_llama_backend: LlamaCppBackend,
) -> None:
    """At temperature 0 the default model writes each turn's call as bare JSON, without the
    <tool_call> tags of its template; each opens a call object, so each is finished under
    the grammar of the tools (one call object: the model then ends its turn). Both are read,
    named as recoveries, and run; the last turn, past the bound, offers no tools."""
    conversation = Conversation(settings={"max_tool_iters": 2})
    conversation.add_user("What is 17*23? Use the calculator.")
    box = demo_toolbox()
    options = {"max_tokens": 64, "temperature": 0.0}
    events = list(run_loop_sync(fresh_llama_backend, conversation, box, request_options=options))
    assert [e.code for e in events if isinstance(e, Notice)] == [
        "constrained-call",  # each reply opened with a call: finished under the grammar
        "recovered-bare-json",
        "constrained-call",
        "recovered-bare-json",
        "call-without-tools",  # the last answer is a call nobody runs, and says so
    ]
    assert [(e.call.name, e.call.arguments) for e in events if isinstance(e, ToolRun)] == [
        ("calculator", {"expression": "17*23"}),
        ("calculator", {"expression": "391"}),
    ]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.status for r in results] == ["ok"] * 2
    assert [r.content for r in results] == ["391", "391"]
    assert [e.finish_reason for e in events if isinstance(e, Done)] == [
        "tool_calls",
        "tool_calls",
        "stop",
    ]
    replies = [m for m in conversation.messages if m["role"] == "assistant"]
    assert [m["content"] for m in replies[:2]] == [None, None]  # no call left as text
    # the turn past the bound is offered no tools; the model still writes a call, as text
    # (named by the notice above, never shown silently)
    call = {"name": "calculator", "arguments": {"expression": "391"}}
    assert json.loads(replies[2]["content"]) == call


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "runShellCommand", "arguments": {"command": "ls"}}',
        '```json\n{"name": "runShellCommand", "arguments": {"command": "ls"}}\n```',
        '<tool_call>\n{"name": "runShellCommand", "arguments": {"command": "ls"}}\n</tool_call>',
    ],
)
def test_a_call_to_a_tool_never_declared_is_named_not_passed_silently(
    server: FakeOpenAIServer, text: str
) -> None:
    """opencode offers ``bash``; a small model calls ``runShellCommand``: it stays text,
    nothing runs, and a notice says which tool it named."""
    server.add_stream(text_deltas(text, size=5))
    backend = OpenAIBackend("m", base_url=server.base_url)
    events = list(stream_sync(backend.stream(Request([{"role": "user", "content": "ls"}], TOOLS))))
    assert not [e for e in events if isinstance(e, CallEnd)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == text
    (told,) = [e for e in events if isinstance(e, Notice)]
    assert told.code == "undeclared-tool" and "runShellCommand" in told.message
