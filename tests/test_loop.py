"""The tool loop against the fake OpenAI-compatible server: what runs, what is sent next."""

from __future__ import annotations

import inspect
import json
import threading
import time
from collections.abc import Iterator
from typing import Any, Literal

import pytest

from toolwire.backends import OpenAIBackend
from toolwire.conversation import Conversation, prune, resolve_settings
from toolwire.errors import ToolwireError
from toolwire.events import CallEnd, Notice, TextDelta, ToolResult, ToolRun
from toolwire.loop import RETRY_DELAYS, run_loop, run_loop_sync
from toolwire.testing import FakeOpenAIServer, text_deltas, tool_call_deltas
from toolwire.tools import Tool, Toolbox, ToolUnavailable


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        self.active = 0
        self.most_active = 0

    def note(self, name: str, **kwargs: Any) -> None:
        with self.lock:
            self.calls.append((name, kwargs))


def make_toolbox(rec: Recorder) -> Toolbox:
    box = Toolbox()

    @box.tool(read_only=True)
    def get_weather(city: str, days: int = 1) -> dict[str, Any]:
        """Weather for a city.

        Args:
            city: The city.
            days: How many days.
        """
        with rec.lock:
            rec.active += 1
            rec.most_active = max(rec.most_active, rec.active)
        time.sleep(0.2)
        with rec.lock:
            rec.active -= 1
        rec.note("get_weather", city=city, days=days)
        return {"city": city, "forecast": "sunny", "days": days}

    @box.tool(side_effects=True, session=["workspace"])
    def write_note(text: str, workspace: str) -> str:
        """Write a note in the workspace."""
        rec.note("write_note", text=text, workspace=workspace)
        return f"saved in {workspace}"

    @box.tool(read_only=True)
    def flaky(mode: Literal["boom", "later"]) -> str:
        """Fails on purpose."""
        rec.note("flaky", mode=mode)
        if mode == "later":
            raise ToolUnavailable("rate limited")
        raise ValueError("bad luck")

    return box


def calls(*items: tuple[str, str, dict[str, Any]]) -> list[dict[str, Any]]:
    return tool_call_deltas([(i, n, json.dumps(a)) for i, n, a in items], size=7)


def backend(server: FakeOpenAIServer) -> OpenAIBackend:
    return OpenAIBackend("test-model", base_url=server.base_url)


def test_several_calls_in_a_turn_then_an_answer(server: FakeOpenAIServer) -> None:
    rec = Recorder()
    server.add_stream(
        calls(
            ("c1", "get_weather", {"city": "Paris", "days": "2"}),
            ("c2", "get_weather", {"city": "Rome"}),
        ),
        finish_reason="tool_calls",
    )
    server.add_stream(text_deltas("Sunny in both."))
    conv = Conversation()
    conv.add_user("Weather in Paris and Rome?")
    events = list(run_loop_sync(backend(server), conv, make_toolbox(rec)))
    runs = [e.call for e in events if isinstance(e, ToolRun)]
    assert [(c.name, c.arguments) for c in runs] == [
        ("get_weather", {"city": "Paris", "days": 2}),  # typed by the schema
        ("get_weather", {"city": "Rome"}),
    ]
    assert rec.most_active == 2  # independent read-only calls ran together
    second = server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    assistant = second[1]
    assert assistant["content"] is None
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {
        "city": "Paris",
        "days": "2",
    }
    assert [m["tool_call_id"] for m in second[2:]] == ["c1", "c2"]
    assert json.loads(second[2]["content"])["days"] == 2
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Sunny in both."
    assert conv.messages[-1] == {"role": "assistant", "content": "Sunny in both."}


def test_a_missing_argument_is_the_result(server: FakeOpenAIServer) -> None:
    rec = Recorder()
    server.add_stream(calls(("c1", "get_weather", {"days": 2})), finish_reason="tool_calls")
    server.add_stream(text_deltas("Which city?"))
    conv = Conversation()
    conv.add_user("Weather?")
    events = list(run_loop_sync(backend(server), conv, make_toolbox(rec)))
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.status == "invalid"
    assert "- city: required (text), but it was missing." in result.content
    assert not rec.calls and not [e for e in events if isinstance(e, ToolRun)]
    assert server.requests[1]["messages"][-1]["content"] == result.content


def test_read_only_offers_read_tools_and_refuses_a_write_by_name(
    server: FakeOpenAIServer,
) -> None:
    rec = Recorder()
    server.add_stream(calls(("c1", "write_note", {"text": "hi"})), finish_reason="tool_calls")
    server.add_stream(text_deltas("I cannot write."))
    conv = Conversation(settings={"read_only": True}, session={"workspace": "ws1"})
    conv.add_user("Note this.")
    events = list(run_loop_sync(backend(server), conv, make_toolbox(rec)))
    offered = [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert offered == ["get_weather", "flaky"]
    # the write tool was not offered: a call to it is not a call (a notice names it)
    assert not [e for e in events if isinstance(e, ToolResult)] and not rec.calls
    (notice,) = [e for e in events if isinstance(e, Notice)]
    assert notice.code == "undeclared-tool" and "write_note" in notice.message


def test_the_session_owns_its_arguments(server: FakeOpenAIServer) -> None:
    rec = Recorder()
    server.add_stream(
        calls(("c1", "write_note", {"text": "hi", "workspace": "someone-else"})),
        finish_reason="tool_calls",
    )
    server.add_stream(text_deltas("Saved."))
    conv = Conversation(session={"workspace": "mine"})
    conv.add_user("Note hi.")
    list(run_loop_sync(backend(server), conv, make_toolbox(rec)))
    assert rec.calls == [("write_note", {"text": "hi", "workspace": "mine"})]
    schema = server.requests[0]["tools"][1]["function"]["parameters"]
    assert "workspace" not in schema["properties"]


def test_the_bound_ends_with_an_answer_without_tools(server: FakeOpenAIServer) -> None:
    rec = Recorder()
    for i in range(2):  # two different calls (the same call again is a repeat, not run)
        server.add_stream(
            calls((f"c{i}", "get_weather", {"city": "Oslo", "days": i + 1})),
            finish_reason="tool_calls",
        )
    server.add_stream(text_deltas("Oslo is sunny."))
    conv = Conversation()
    conv.add_user("Weather in Oslo, for one day, then two.")
    events = list(
        run_loop_sync(backend(server), conv, make_toolbox(rec), settings={"max_tool_iters": 2})
    )
    assert len(server.requests) == 3
    assert "tools" in server.requests[1] and "tools" not in server.requests[2]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Oslo is sunny."
    assert len(rec.calls) == 2


def test_leaving_before_the_tools_run_runs_none(server: FakeOpenAIServer) -> None:
    rec = Recorder()
    server.add_stream(calls(("c1", "write_note", {"text": "x"})), finish_reason="tool_calls")
    conv = Conversation(session={"workspace": "w"})
    conv.add_user("Write x.")
    events = run_loop_sync(backend(server), conv, make_toolbox(rec))
    for event in events:
        if isinstance(event, CallEnd):
            events.close()  # type: ignore[attr-defined]
            break
    time.sleep(0.3)
    assert rec.calls == []
    assert len(server.requests) == 1


def test_tool_failures_are_data(server: FakeOpenAIServer) -> None:
    server.add_stream(
        calls(
            ("c1", "flaky", {"mode": "boom"}),
            ("c2", "flaky", {"mode": "later"}),
            ("c3", "nope", {}),
        ),
        finish_reason="tool_calls",
    )
    server.add_stream(text_deltas("Sorry."))
    conv = Conversation()
    conv.add_user("Try.")
    rec = Recorder()
    box = make_toolbox(rec)
    events = list(run_loop_sync(backend(server), conv, box, retry_delays=(0.0, 0.0)))
    results = {e.call_id: e for e in events if isinstance(e, ToolResult)}
    assert rec.calls.count(("flaky", {"mode": "boom"})) == 1  # an error is not tried again
    assert rec.calls.count(("flaky", {"mode": "later"})) == 3  # one try, then one per delay
    assert results["c1"].status == "error" and "ValueError: bad luck" in results["c1"].content
    assert results["c2"].status == "unavailable" and "may be tried again" in results["c2"].content
    # a tool the request never offered is not called: a notice names it
    assert "c3" not in results
    assert [e.code for e in events if isinstance(e, Notice)] == ["undeclared-tool"]
    assert [m["tool_call_id"] for m in server.requests[1]["messages"][2:]] == ["c1", "c2"]


def test_a_side_effect_that_times_out_has_an_unknown_outcome(server: FakeOpenAIServer) -> None:
    ops: list[str] = []

    def send(to: str, operation_id: str) -> str:
        ops.append(operation_id)
        time.sleep(1)
        return "sent"

    box = Toolbox(
        [Tool.from_function(send, side_effects=True, session=["operation_id"], timeout=0.2)]
    )
    server.add_stream(calls(("c1", "send", {"to": "ana"})), finish_reason="tool_calls")
    server.add_stream(text_deltas("Unclear."))
    conv = Conversation()
    conv.add_user("Send it.")
    events = list(run_loop_sync(backend(server), conv, box))
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.status == "unknown-outcome" and "check before calling it again" in result.content
    time.sleep(1)
    assert len(ops) == 1 and ops[0].startswith("op-")


def test_settings_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"TOOLWIRE_TOOL_FORMAT": "mistral"}
    assert resolve_settings(environ=env)["tool_format"] == "mistral"
    assert resolve_settings(None, {"tool_format": "hermes"}, environ=env)["tool_format"] == "hermes"
    assert (
        resolve_settings({"tool_format": "none"}, {"tool_format": "hermes"}, environ=env)[
            "tool_format"
        ]
        == "none"
    )
    assert (
        resolve_settings(model_default={"tool_format": "qwen-xml"}, environ={})["tool_format"]
        == "qwen-xml"
    )
    assert resolve_settings(environ={})["tool_format"] == "auto"
    with pytest.warns(UserWarning, match="not a valid tool_format"):
        got = resolve_settings(
            model_default={"tool_format": "llama3"}, environ={"TOOLWIRE_TOOL_FORMAT": "xml"}
        )
    assert got["tool_format"] == "llama3"
    with pytest.raises(ValueError):
        resolve_settings({"max_tool_iters": -1})


def test_pruning_drops_whole_turns() -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u1" * 100},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "r" * 200},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "u2"},
        {"role": "assistant", "content": "ok"},
    ]
    kept = prune(messages, budget=20)
    assert [m["role"] for m in kept] == ["system", "user", "assistant"]
    assert kept[1]["content"] == "u2"
    assert prune(messages, budget=10_000) == messages
    for budget in range(0, 200, 5):  # never a call without its result, or the reverse
        out = prune(messages, budget)
        ids = {c["id"] for m in out for c in m.get("tool_calls") or ()}
        assert ids == {m["tool_call_id"] for m in out if m["role"] == "tool"}


def _book_when_free(
    server: FakeOpenAIServer, busy: int, retry_delays: tuple[float, ...]
) -> tuple[ToolResult, list[str]]:
    """Run one call of a booking tool that is unavailable for its first ``busy`` tries."""
    seen: list[str] = []

    def book(room: str, operation_id: str) -> str:
        seen.append(operation_id)
        if len(seen) <= busy:
            raise ToolUnavailable("the booking service is busy")
        return f"booked {room}"

    box = Toolbox([Tool.from_function(book, side_effects=True, session=["operation_id"])])
    server.add_stream(calls(("c1", "book", {"room": "A"})), finish_reason="tool_calls")
    server.add_stream(text_deltas("Booked."))
    conv = Conversation()
    conv.add_user("Book room A.")
    events = list(run_loop_sync(backend(server), conv, box, retry_delays=retry_delays))
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    return result, seen


def test_unavailable_is_tried_again_with_the_same_operation_id(server: FakeOpenAIServer) -> None:
    result, seen = _book_when_free(server, busy=2, retry_delays=(0.0, 0.0))
    assert result.status == "ok" and result.content == "booked A"
    assert len(seen) == 3 and len(set(seen)) == 1  # one operation, tried three times


def test_the_retry_delays_set_the_number_of_tries(server: FakeOpenAIServer) -> None:
    result, seen = _book_when_free(server, busy=4, retry_delays=(0.0,) * 4)
    assert result.status == "ok" and len(seen) == 5


def test_no_retry_delays_means_one_try(server: FakeOpenAIServer) -> None:
    result, seen = _book_when_free(server, busy=1, retry_delays=())
    assert result.status == "unavailable" and "may be tried again" in result.content
    assert len(seen) == 1


def test_by_default_the_loop_waits_the_published_retry_delays() -> None:
    assert inspect.signature(run_loop).parameters["retry_delays"].default is RETRY_DELAYS


def test_a_providers_key_goes_to_its_own_host() -> None:
    import asyncio

    import httpx

    from toolwire.backends import Request, stream_sync

    hosts: list[tuple[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        hosts.append((request.url.host, request.headers.get("authorization", "")))
        return httpx.Response(200, text="data: [DONE]\n\n")

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    anthropic = OpenAIBackend.for_provider("anthropic", "claude", api_key="sk-ant", client=client)
    list(stream_sync(anthropic.stream(Request([{"role": "user", "content": "hi"}]))))
    assert hosts == [("api.anthropic.com", "Bearer sk-ant")]
    with pytest.raises(ValueError, match="unknown provider"):
        OpenAIBackend.for_provider("nowhere", "m")
    asyncio.run(client.aclose())


def test_the_constrained_setting_reaches_every_request() -> None:
    """``constrained`` is a setting like ``strict``: the conversation's (or the caller's)
    value is what each turn's request carries."""
    from toolwire.events import Done as _Done

    seen: list[bool] = []

    class Recording:
        name = "recording"

        async def stream(self, request: Any) -> Any:
            seen.append(request.constrained)
            yield _Done("stop")

    box = Toolbox()

    @box.tool()
    def noop() -> str:
        """Does nothing."""
        return ""

    for settings, expected in (({}, True), ({"constrained": False}, False)):
        conversation = Conversation(settings=settings)
        conversation.add_user("hi")
        list(run_loop_sync(Recording(), conversation, box))  # type: ignore[arg-type]
        assert seen.pop() is expected
    conversation = Conversation(settings={"constrained": "no"})
    conversation.add_user("hi")
    with pytest.raises(ToolwireError):
        list(run_loop_sync(Recording(), conversation, box))  # type: ignore[arg-type]
