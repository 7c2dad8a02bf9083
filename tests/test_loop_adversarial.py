"""Odd but legal wire shapes, broken streams and awkward tools, against the backends and the loop.

The tests marked as regressions each check a bug that was found and fixed; the others pin
down behaviour that always held.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from toolwire.backends import OllamaBackend, OpenAIBackend, Request, stream_sync
from toolwire.chat import CalculatorError, calculate, chat
from toolwire.conversation import Conversation, resolve_settings
from toolwire.errors import BackendError
from toolwire.events import CallEnd, CallStart, Done, Event, TextDelta, ToolResult
from toolwire.loop import run_loop_sync
from toolwire.testing import FakeOpenAIServer, text_deltas, tool_call_deltas
from toolwire.tools import Tool, Toolbox

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def chunk(delta: Any, finish: str | None = None, index: int = 0) -> str:
    return json.dumps({"choices": [{"index": index, "delta": delta, "finish_reason": finish}]})


def sse_backend(body: bytes, *, ollama: bool = False) -> OpenAIBackend | OllamaBackend:
    """A backend whose provider answers with exactly these bytes."""

    def handler(request: httpx.Request) -> httpx.Response:
        kind = "application/x-ndjson" if ollama else "text/event-stream"
        return httpx.Response(200, content=body, headers={"content-type": kind})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    if ollama:
        return OllamaBackend("m", base_url="http://provider.test", client=client)
    return OpenAIBackend("m", base_url="http://provider.test/v1/", client=client)


def events_of(backend: OpenAIBackend | OllamaBackend) -> list[Event]:
    request = Request([{"role": "user", "content": "x"}], TOOLS)
    return list(stream_sync(backend.stream(request)))


def sse(*payloads: str, newline: str = "\n", prefix: str = "data: ") -> bytes:
    return "".join(f"{prefix}{p}{newline}{newline}" for p in payloads).encode()


def the_call(events: list[Event]) -> Any:
    (end,) = [e for e in events if isinstance(e, CallEnd)]
    return end.call


# ---------------------------------------------------------------- wire shapes that work


def test_data_without_space_crlf_and_keep_alive_comments() -> None:
    body = (
        b": keep-alive\r\n\r\n"
        b"event: message\r\n"
        + sse(
            chunk({"role": "assistant", "content": "Hi"}),
            chunk({"content": " there"}),
            newline="\r\n",
            prefix="data:",
        )
        + b": ping\r\n\r\n"
        + sse(chunk({}, "stop"), "[DONE]", newline="\r\n", prefix="data:")
    )
    events = events_of(sse_backend(body))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hi there"
    assert events[-1] == Done("stop", None)


def test_arguments_as_an_object_and_a_usage_only_final_chunk() -> None:
    call = {
        "index": 0,
        "id": "a",
        "function": {"name": "get_weather", "arguments": {"city": "Oslo"}},
    }
    usage = json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
    body = sse(
        chunk({"content": None, "tool_calls": [call]}), chunk({}, "tool_calls"), usage, "[DONE]"
    )
    events = events_of(sse_backend(body))
    assert the_call(events).arguments == {"city": "Oslo"}
    assert events[-1] == Done("tool_calls", {"prompt_tokens": 3, "completion_tokens": 2})


def test_an_error_mid_stream_is_a_backend_error() -> None:
    body = sse(chunk({"content": "Hel"}), json.dumps({"error": {"message": "overloaded"}}))
    with pytest.raises(BackendError, match="overloaded"):
        events_of(sse_backend(body))


# ---------------------------------------------------------------- regressions: wire shapes


def test_regression_deltas_without_index_that_repeat_the_id_keep_their_arguments() -> None:
    # With no ``index``, the deltas of one call are joined by their repeated id (not each
    # opened as a new nameless call, losing the arguments).
    body = sse(
        chunk({"tool_calls": [{"id": "a", "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"id": "a", "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"id": "a", "function": {"arguments": '"Oslo"}'}}]}),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    call = the_call(events_of(sse_backend(body)))
    assert call.arguments == {"city": "Oslo"}


def test_regression_a_name_split_across_deltas_is_joined() -> None:
    # The call is named ``get_weather``: the rest of the name is kept after the call has
    # been announced as ``get_``.
    body = sse(
        chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "get_"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "weather", "arguments": "{}"}}]}),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    assert the_call(events_of(sse_backend(body))).name == "get_weather"


def test_regression_only_the_first_choice_is_the_reply() -> None:
    # With several choices (n > 1) the reply is choice 0, not every choice's text run
    # together ("AB").
    body = sse(
        chunk({"content": "A"}, index=0),
        chunk({"content": "B"}, index=1),
        chunk({}, "stop"),
        "[DONE]",
    )
    events = events_of(sse_backend(body))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "A"


def test_regression_a_null_index_beside_numbered_calls_is_not_a_type_error() -> None:
    # A null index is the first slot, as a missing one is (sorting int and None slots once
    # raised TypeError out of the backend): both calls are read, each by its own id (two
    # different calls: the same call twice would be one, a repeat).
    def slot(index: int | None, cid: str, city: str) -> str:
        fn = {"name": "get_weather", "arguments": json.dumps({"city": city})}
        return chunk({"tool_calls": [{"index": index, "id": cid, "function": fn}]})

    body = sse(slot(None, "a", "Oslo"), slot(1, "b", "Rome"), "[DONE]")
    events = events_of(sse_backend(body))
    ends = [e.call for e in events if isinstance(e, CallEnd)]
    assert [(c.id, c.name, c.arguments) for c in ends] == [
        ("a", "get_weather", {"city": "Oslo"}),
        ("b", "get_weather", {"city": "Rome"}),
    ]
    assert events[-1] == Done("tool_calls", None)


@pytest.mark.parametrize(
    "payload",
    [
        json.dumps({"choices": [{"index": 0, "delta": "text"}]}),
        chunk({"tool_calls": [{"index": 0, "id": "a", "function": "get_weather"}]}),
        "[" * 100_000,
    ],
    ids=["delta-not-an-object", "function-not-an-object", "deeply-nested-chunk"],
)
def test_regression_a_malformed_openai_chunk_is_a_backend_error(payload: str) -> None:
    # A BackendError, not the AttributeError / RecursionError that once escaped the backend.
    with pytest.raises(BackendError):
        events_of(sse_backend(sse(payload, "[DONE]")))


@pytest.mark.parametrize(
    "line",
    [json.dumps({"message": "text", "done": False}), "[" * 100_000],
    ids=["message-not-an-object", "deeply-nested-line"],
)
def test_regression_a_malformed_ollama_line_is_a_backend_error(line: str) -> None:
    # A BackendError, not the AttributeError / RecursionError that once escaped the backend.
    body = (line + "\n" + json.dumps({"done": True}) + "\n").encode()
    with pytest.raises(BackendError):
        events_of(sse_backend(body, ollama=True))


def test_regression_a_stream_cut_before_its_end_runs_no_truncated_call(
    server: FakeOpenAIServer,
) -> None:
    # The stream stops mid-arguments: no finish_reason, no [DONE]. The reply is refused as
    # incomplete and the cut call is not run (the argument reader would have repaired
    # '{"city": "Os' and run the tool with city="Os").
    ran: list[str] = []
    box = Toolbox()

    @box.tool(read_only=True)
    def get_weather(city: str) -> str:
        """Weather."""
        ran.append(city)
        return "sunny"

    cut = {"index": 0, "id": "a", "function": {"name": "get_weather", "arguments": '{"city": "Os'}}
    server.add_raw([chunk({"tool_calls": [cut]})])
    server.add_stream(text_deltas("ok"))
    conv = Conversation()
    conv.add_user("Weather in Oslo?")
    with pytest.raises(BackendError, match="the stream ended before the reply was complete"):
        list(run_loop_sync(OpenAIBackend("m", base_url=server.base_url), conv, box))
    assert ran == []
    assert len(server.requests) == 1  # nothing was sent after the cut reply


# ---------------------------------------------------------------- regressions: the loop


def pay_toolbox(ran: list[tuple[int, str, str]]) -> Toolbox:
    box = Toolbox()

    @box.tool(side_effects=True, session=["operation_id", "workspace"])
    def pay(amount: int, operation_id: str, workspace: str) -> str:
        """Pay an amount."""
        ran.append((amount, operation_id, workspace))
        return "paid"

    return box


def test_regression_operation_ids_differ_across_turns_when_the_provider_sends_no_ids(
    server: FakeOpenAIServer,
) -> None:
    # Two different payments in two turns; the provider sends no call ids, so both calls are
    # named call_0. Each gets its own operation id (idempotency key): were they the same, a
    # service deduplicating on it would drop the second payment.
    for amount in (5, 7):
        call = {
            "index": 0,
            "function": {"name": "pay", "arguments": json.dumps({"amount": amount})},
        }
        server.add_raw([chunk({"tool_calls": [call]}), chunk({}, "tool_calls"), "[DONE]"])
    server.add_stream(text_deltas("Done."))
    ran: list[tuple[int, str, str]] = []
    conv = Conversation(session={"workspace": "w"})
    conv.add_user("Pay 5 then 7.")
    list(run_loop_sync(OpenAIBackend("m", base_url=server.base_url), conv, pay_toolbox(ran)))
    assert [a for a, _, _ in ran] == [5, 7]
    assert ran[0][1] != ran[1][1]


def test_regression_strict_mode_still_drops_a_session_argument_from_the_model(
    server: FakeOpenAIServer,
) -> None:
    # The model's workspace is dropped and the session's is used, as without strict (strict
    # mode does not reject the call as "not a field this tool takes").
    args = json.dumps({"amount": 1, "workspace": "someone-else"})
    server.add_stream(tool_call_deltas([("c1", "pay", args)]), finish_reason="tool_calls")
    server.add_stream(text_deltas("Paid."))
    ran: list[tuple[int, str, str]] = []
    conv = Conversation(session={"workspace": "mine"}, settings={"strict": True})
    conv.add_user("Pay 1.")
    list(run_loop_sync(OpenAIBackend("m", base_url=server.base_url), conv, pay_toolbox(ran)))
    assert [(a, w) for a, _, w in ran] == [(1, "mine")]


def test_regression_a_session_parameter_never_reaches_the_schema_of_an_explicit_tool() -> None:
    # ``workspace`` is neither a property nor required in what the model sees, though the
    # schema given to Tool.from_schema lists it.
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "workspace": {"type": "string"}},
        "required": ["text", "workspace"],
    }
    tool = Tool.from_schema("note", schema, lambda text, workspace: "ok", session=["workspace"])
    shown = tool.schema()["function"]["parameters"]
    assert "workspace" not in shown["properties"]
    assert "workspace" not in shown.get("required", [])


class _NoText:
    def __str__(self) -> str:
        raise RuntimeError("no text for this")

    __repr__ = __str__


@pytest.mark.parametrize("value", [10**5000, _NoText()], ids=["int-over-4300-digits", "str-raises"])
def test_regression_a_result_that_cannot_become_text_is_a_result(
    server: FakeOpenAIServer, value: Any
) -> None:
    # The loop answers the call with a result the model can read, though turning the value
    # into text raises ValueError / RuntimeError.
    box = Toolbox()

    @box.tool(read_only=True)
    def odd() -> object:
        """Returns something odd."""
        return value

    server.add_stream(tool_call_deltas([("c1", "odd", "{}")]), finish_reason="tool_calls")
    server.add_stream(text_deltas("ok"))
    conv = Conversation()
    conv.add_user("x")
    events = list(run_loop_sync(OpenAIBackend("m", base_url=server.base_url), conv, box))
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.call_id == "c1"
    assert conv.messages[-2]["role"] == "tool"


def test_regression_an_async_callable_object_is_awaited(server: FakeOpenAIServer) -> None:
    # The coroutine is awaited and the result is "2", not the text of an un-awaited
    # coroutine from running the callable object in a thread.
    class AddOne:
        async def __call__(self, x: int) -> int:
            return x + 1

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    box = Toolbox([Tool.from_schema("add_one", schema, AddOne(), read_only=True)])
    server.add_stream(tool_call_deltas([("c1", "add_one", '{"x": 1}')]), finish_reason="tool_calls")
    server.add_stream(text_deltas("ok"))
    conv = Conversation()
    conv.add_user("x")
    events = list(run_loop_sync(OpenAIBackend("m", base_url=server.base_url), conv, box))
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert (result.status, result.content) == ("ok", "2")


def test_regression_no_tool_timeout_can_be_chosen() -> None:
    # ``tool_timeout=None`` is a valid value ("no limit"): an explicit or stored None is
    # used, not taken as "not given" (which let the 60 s default win).
    assert resolve_settings({"tool_timeout": None})["tool_timeout"] is None
    assert resolve_settings(None, {"tool_timeout": None})["tool_timeout"] is None


def test_regression_the_calculator_refuses_infinite_and_nan_results() -> None:
    # A float literal past the float range is refused as too large, not returned as inf
    # (nor inf - inf as nan): constants get the magnitude check too.
    for expression in ("1e999", "-1e999", "1e999-1e999"):
        with pytest.raises(CalculatorError):
            calculate(expression)


def test_regression_chat_prints_a_refused_call_as_well_as_its_result(
    server: FakeOpenAIServer,
) -> None:
    # Every call the model made is printed ("→ word_count({})") before its result, a call
    # refused before running (bad arguments) too, not only its "←" result.
    server.add_stream(tool_call_deltas([("c1", "word_count", "{}")]), finish_reason="tool_calls")
    server.add_stream(text_deltas("Sorry."))
    out = io.StringIO()
    chat(OpenAIBackend("m", base_url=server.base_url), once="x", out=out)
    assert "→ word_count(" in out.getvalue() and "[invalid]" in out.getvalue()


def test_chat_prints_a_call_to_a_tool_never_offered_as_a_notice(
    server: FakeOpenAIServer,
) -> None:
    # A call to a tool the request never declared is not a call: it is named, never run.
    server.add_stream(tool_call_deltas([("c1", "nope", "{}")]), finish_reason="tool_calls")
    out = io.StringIO()
    chat(OpenAIBackend("m", base_url=server.base_url), once="x", out=out)
    assert "did not declare" in out.getvalue() and "→ nope(" not in out.getvalue()
    assert len(server.requests) == 1


# ---------------------------------------------------------------- behaviour that holds


@pytest.mark.parametrize(
    "expression",
    [
        "9**9**9",
        "2**1001",
        "(10**300)**999",
        "1000**1000",
        "1e308*10",
        "2.0**10000",
        "(-8)**(1/3)",
        "0**-1",
        "__import__('os')",
        "(1).real",
        "[1]*9",
        "1 if 1 else 2",
        "~1",
        "True+1",
        "1j",
        "'a'*9",
        "x",
        "(" * 101 + "1" + ")" * 101,
        "9" * 201,
        "1\x00",
    ],
)
def test_the_calculator_refuses_what_is_not_bounded_arithmetic(expression: str) -> None:
    with pytest.raises(CalculatorError):
        calculate(expression)


def test_the_calculator_handles_long_chains() -> None:
    assert calculate("-" * 199 + "1") == -1
    assert calculate("(" * 99 + "2" + ")" * 99) == 2
    assert calculate("2^10") == 1024
    assert calculate("9" * 200) == int("9" * 200)


@pytest.mark.parametrize(
    "first",
    [
        {"content": "Hello"},
        {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "t", "arguments": ""}}]},
    ],
    ids=["text", "regression-native-call"],
)
def test_closing_the_loop_mid_stream_closes_the_providers_connection(first: Any) -> None:
    """A provider streams one delta then keeps the connection open with comments. The
    consumer closes the loop's events at the first event it gets: the provider must see
    the client hang up, and no tool runs.

    Regression (native-call): a streamed native ``tool_calls`` delta reaches the consumer
    as it arrives (CallStart before the reply ends); the drift guard once held every event
    of a reply with no text until a CallEnd, which only comes when the stream ends, so the
    consumer got nothing while the stream stayed open.
    """
    closed = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            length = [h for h in head.lower().split(b"\r\n") if h.startswith(b"content-length")]
            while len(body) < int(length[0].split(b":")[1]):
                body += conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )

            def send(text: str) -> None:
                raw = text.encode()
                conn.sendall(b"%x\r\n%s\r\n" % (len(raw), raw))

            send("data: " + chunk(first) + "\n\n")
            conn.settimeout(0.05)
            for _ in range(100):
                try:
                    send(": keep-alive\n\n")
                    if conn.recv(1) == b"":
                        break
                except TimeoutError:
                    continue
                except OSError:
                    break
            else:
                return
            closed.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ran: list[int] = []
    box = Toolbox()

    @box.tool
    def t() -> str:
        """A tool."""
        ran.append(1)
        return "x"

    port = listener.getsockname()[1]
    conv = Conversation()
    conv.add_user("x")
    events = run_loop_sync(OpenAIBackend("m", base_url=f"http://127.0.0.1:{port}/v1/"), conv, box)
    got = []
    with contextlib.suppress(BackendError):  # the server gives up after a while
        for event in events:
            got.append(event)
            events.close()  # type: ignore[attr-defined]
            break
    assert got and isinstance(got[0], (TextDelta, CallStart))
    assert closed.wait(10)
    thread.join(10)
    listener.close()
    assert ran == []
    assert [m["role"] for m in conv.messages] == ["user"]


def test_tool_messages_follow_the_call_order_across_read_groups(server: FakeOpenAIServer) -> None:
    box = Toolbox()

    @box.tool(read_only=True)
    def read(n: int) -> int:
        """Read."""
        return n

    @box.tool
    def write(n: int) -> int:
        """Write."""
        return -n

    items = [("c1", "read", 1), ("c2", "read", 2), ("c3", "nope", 0), ("c4", "write", 3)]
    items += [("c5", "read", 4)]
    deltas = tool_call_deltas([(i, n, json.dumps({"n": v})) for i, n, v in items], interleave=True)
    server.add_stream(deltas, finish_reason="tool_calls")
    server.add_stream(text_deltas("ok"))
    conv = Conversation()
    conv.add_user("x")
    list(run_loop_sync(OpenAIBackend("m", base_url=server.base_url), conv, box))
    sent = server.requests[1]["messages"]
    # c3 names a tool never offered: not a call (a notice names it), the rest keep their order
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["c1", "c2", "c4", "c5"]
    tools = [(m["tool_call_id"], m["content"]) for m in sent[2:]]
    assert tools == [("c1", "1"), ("c2", "2"), ("c4", "-3"), ("c5", "4")]
