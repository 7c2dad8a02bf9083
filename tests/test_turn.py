"""One typed turn in, one decided stream out: what the pipeline settles once, seen through
every surface — the loop, and the gateway's three APIs with the official clients over real
HTTP in front of a fake upstream on 127.0.0.1.

Each case here is a decision that used to be made again by each surface, and differed: the
policy for fields a schema does not list, ``parallel_tool_calls``, a call whose arguments are
not an object, and ``strict`` against a transport's own tolerances.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolwire import Conversation, Tool, Toolbox, run_loop
from toolwire.backends import OllamaBackend, OpenAIBackend, Request, stream_sync
from toolwire.errors import BackendError
from toolwire.events import (
    NOTICES,
    TOLERANCES,
    CallEnd,
    Done,
    Notice,
    TextDelta,
    ToolRun,
    notice_codes,
)
from toolwire.testing import FakeOpenAIServer, tool_call_deltas

from .test_gateway_apis import (  # the same clients and fixtures as the three-API tests
    CHAT_TOOL,
    SCHEMA,
    VIA,
    gateway,
    upstream,
)

__all__ = ["gateway", "upstream"]  # fixtures, used by name

ROOT = Path(__file__).parent.parent
USER = [{"role": "user", "content": "Weather in Rome?"}]


def _native(*calls: tuple[str, str]) -> list[dict[str, Any]]:
    return tool_call_deltas(
        [(f"call_{i}", name, arguments) for i, (name, arguments) in enumerate(calls)]
    )


def _chat(url: str, **extra: Any) -> dict[str, Any]:
    body = {"model": "gw", "messages": USER, "tools": [CHAT_TOOL], **extra}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    reply: dict[str, Any] = r.json()
    return reply


# --------------------------------------------------------------------------- arguments


def test_fields_the_schema_does_not_list_are_dropped_alike_by_the_loop_and_every_api(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    """One policy: the schema is the tool's contract, so a field it does not list is
    dropped (and named), whether the loop runs the tool or a gateway client does."""
    sent = '{"city": "Rome", "days": "2", "extra": 1}'
    for stream in (False, True):
        for via in VIA.values():
            upstream.add_stream(_native(("get_weather", sent)), finish_reason="tool_calls")
            assert via(gateway, stream) == [("get_weather", {"city": "Rome", "days": 2})]
    upstream.add_stream(_native(("get_weather", sent)), finish_reason="tool_calls")
    notices = _chat(gateway)["toolwire"]["notices"]
    assert [n["code"] for n in notices] == ["arguments-unknown-fields"]
    assert "extra" in notices[0]["message"]

    got: list[dict[str, Any]] = []

    def get_weather(city: str, days: int = 1) -> str:
        got.append({"city": city, "days": days})
        return "sunny"

    upstream.add_stream(_native(("get_weather", sent)), finish_reason="tool_calls")
    upstream.add_stream([{"content": "Sunny."}])
    backend = OpenAIBackend("engine", base_url=upstream.base_url)
    tool = Tool.from_schema("get_weather", SCHEMA, get_weather, description="Weather.")

    async def go() -> list[Any]:
        conversation = Conversation([{"role": "user", "content": "Weather in Rome?"}])
        return [e async for e in run_loop(backend, conversation, Toolbox([tool]))]

    events = asyncio.run(go())
    assert got == [{"city": "Rome", "days": 2}]
    (run,) = [e for e in events if isinstance(e, ToolRun)]
    assert run.call.arguments == {"city": "Rome", "days": 2}
    assert "arguments-unknown-fields" in [e.code for e in events if isinstance(e, Notice)]


def test_a_call_whose_arguments_are_not_an_object_is_text_in_every_api(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    for stream in (False, True):
        for api, via in VIA.items():
            upstream.add_stream(_native(("get_weather", '["Rome"]')), finish_reason="tool_calls")
            if api == "messages":  # its helper asserts a tool_use stop: ask it plainly here
                continue
            assert via(gateway, stream) == []
    upstream.add_stream(_native(("get_weather", '["Rome"]')), finish_reason="tool_calls")
    reply = _chat(gateway)
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "stop" and not choice["message"].get("tool_calls")
    assert '["Rome"]' in choice["message"]["content"]
    assert "call-not-read" in [n["code"] for n in reply["toolwire"]["notices"]]
    upstream.requests.clear()
    upstream.add_stream(_native(("get_weather", '["Rome"]')), finish_reason="tool_calls")
    r = httpx.post(
        gateway + "/v1/messages",
        json={"model": "gw", "max_tokens": 50, "messages": USER, "tools": [_anthropic_tool()]},
        timeout=30,
    )
    body = r.json()
    assert body["stop_reason"] == "end_turn"
    assert [b["type"] for b in body["content"]] == ["text"]


def _anthropic_tool() -> dict[str, Any]:
    return {"name": "get_weather", "description": "Weather.", "input_schema": SCHEMA}


# --------------------------------------------------------------------------- parallel calls


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_parallel_calls_off_passes_the_first_call_in_every_api(
    upstream: FakeOpenAIServer, gateway: str, stream: bool
) -> None:
    two = _native(("get_weather", '{"city": "Rome"}'), ("get_weather", '{"city": "Oslo"}'))
    upstream.add_stream(two, finish_reason="tool_calls")
    reply = _chat(gateway, parallel_tool_calls=False)
    calls = reply["choices"][0]["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Rome"}]
    assert reply["choices"][0]["finish_reason"] == "tool_calls"
    assert "calls-dropped" in [n["code"] for n in reply["toolwire"]["notices"]]
    upstream.add_stream(two, finish_reason="tool_calls")
    r = httpx.post(
        gateway + "/v1/responses",
        json={
            "model": "gw",
            "input": "Weather?",
            "parallel_tool_calls": False,
            "tools": [{"type": "function", "name": "get_weather", "parameters": SCHEMA}],
        },
        timeout=30,
    )
    assert [o["arguments"] for o in r.json()["output"] if o["type"] == "function_call"] == [
        '{"city": "Rome"}'
    ]
    upstream.add_stream(two, finish_reason="tool_calls")
    r = httpx.post(
        gateway + "/v1/messages",
        json={
            "model": "gw",
            "max_tokens": 50,
            "messages": USER,
            "tools": [_anthropic_tool()],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        },
        timeout=30,
    )
    uses = [b["input"] for b in r.json()["content"] if b["type"] == "tool_use"]
    assert uses == [{"city": "Rome"}] and r.json()["stop_reason"] == "tool_use"


# --------------------------------------------------------------------------- strict


_OBJECT_CALL = {
    "choices": [
        {
            "index": 0,
            "delta": {
                "tool_calls": {
                    "id": "c1",
                    "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                }
            },
            "finish_reason": "tool_calls",
        }
    ]
}


def _events(backend: Any, request: Request) -> list[Any]:
    return list(stream_sync(backend.stream(request)))


def test_strict_refuses_a_transports_tolerance_too() -> None:
    """``tool_calls`` sent as one object instead of a list is read, and named; with
    ``strict`` it is an error, for the OpenAI-compatible and the Ollama transports alike."""
    with FakeOpenAIServer() as server:
        openai_backend = OpenAIBackend("m", base_url=server.base_url)
        ollama_backend = OllamaBackend("m", base_url=server.ollama_url)
        ollama_reply = [
            {
                "content": "",
                "tool_calls": {"function": {"name": "get_weather", "arguments": {"city": "R"}}},
            }
        ]
        for backend, script in (
            (openai_backend, lambda: server.add_raw([json.dumps(_OBJECT_CALL), "[DONE]"])),
            (ollama_backend, lambda: server.add_ollama(ollama_reply)),
        ):
            script()
            events = _events(backend, Request(USER, [CHAT_TOOL]))
            assert [e.call.name for e in events if isinstance(e, CallEnd)] == ["get_weather"]
            codes = [e.code for e in events if isinstance(e, Notice)]
            assert codes == ["recovered-tool-calls-object"]
            assert events[-1].finish_reason == "tool_calls"
            script()
            with pytest.raises(BackendError) as caught:
                _events(backend, Request(USER, [CHAT_TOOL], strict=True))
            assert caught.value.kind == "strict"
            assert "recovered-tool-calls-object" in str(caught.value)


def test_every_tolerance_is_a_code_of_the_one_list() -> None:
    assert set(TOLERANCES) <= set(notice_codes())
    assert "recovered-tool-calls-object" in TOLERANCES and "calls-kept-apart" in TOLERANCES
    assert "undeclared-tool" not in TOLERANCES  # a refusal, not a tolerance


# --------------------------------------------------------------------------- the turn


def test_the_turn_settles_tool_choice_once() -> None:
    other = {"type": "function", "function": {"name": "other", "parameters": {}}}
    named = {"type": "function", "function": {"name": "get_weather"}}
    turn = Request(USER, [CHAT_TOOL, other], tool_choice=named)
    assert [t["function"]["name"] for t in turn.tools or ()] == ["get_weather"]
    assert turn.required and turn.index.names == ("get_weather",)
    turn = Request(USER, [CHAT_TOOL, other], tool_choice="none")
    assert turn.tools is None and turn.tool_choice is None and not turn.index.names
    turn = Request(USER, [CHAT_TOOL, other], tool_choice="auto")
    assert turn.index.names == ("get_weather", "other") and not turn.required
    assert turn.index.schema("get_weather") == SCHEMA and turn.index.schema("nope") is None
    bare = Request(USER, [{"name": "f", "parameters": {"type": "object"}}])
    assert bare.index.names == ("f",)  # a tool given bare is indexed the same


def test_a_reply_that_only_repeats_ends_as_a_stop_not_tool_calls() -> None:
    """The finish reason is decided at the pipeline's end from the calls passed on: a
    native reply whose only call was refused is not ``tool_calls``."""
    with FakeOpenAIServer() as server:
        server.add_stream(_native(("undeclared", "{}")), finish_reason="tool_calls")
        events = _events(OpenAIBackend("m", base_url=server.base_url), Request(USER, [CHAT_TOOL]))
    assert not [e for e in events if isinstance(e, CallEnd)]
    assert events[-1] == Done("stop", events[-1].usage)
    assert "undeclared-tool" in [e.code for e in events if isinstance(e, Notice)]
    assert not any(isinstance(e, TextDelta) for e in events)


# --------------------------------------------------------------------------- notice codes


def test_the_docs_table_of_notice_codes_is_the_list_in_code() -> None:
    """``docs/notices.md`` lists every code of :data:`toolwire.events.NOTICES`, each once,
    in the list's order, with the meaning the code gives it."""
    assert set(NOTICES) == set(notice_codes()) and len(NOTICES) == len(notice_codes())
    page = (ROOT / "docs" / "notices.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    table = [tuple(cell.strip() for cell in row.strip("|").split("|")) for row in rows]
    assert [code.strip("`") for code, *_ in table] == list(notice_codes())
    for code, meaning, tolerance in table:
        assert meaning == NOTICES[code.strip("`")]  # type: ignore[index]
        assert (tolerance == "yes") == (code.strip("`") in TOLERANCES)
