"""One reply pipeline for every transport: the same reply gives the same calls.

Each reply shape goes end to end over real HTTP through the OpenAI-compatible transport
(server-sent events) and Ollama's ``/api/chat`` (JSON lines), both from
:class:`~toolwire.testing.FakeOpenAIServer`, and through the local transport, whose
``Llama`` replays the reply under the published Qwen2.5 template (a Hermes model).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolwire import (
    CallEnd,
    Done,
    LlamaCppBackend,
    Notice,
    OllamaBackend,
    OpenAIBackend,
    Request,
    TextDelta,
    prepare_arguments,
    stream_sync,
)
from toolwire.errors import ArgumentsError, BackendError, UsageError
from toolwire.pipeline import ModelMemory
from toolwire.testing import FakeOpenAIServer, ScriptedLlama, text_deltas, tool_call_deltas

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"
HERMES_TEMPLATE = (FIXTURES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
XML_TEMPLATE = (FIXTURES / "Qwen3-Coder.jinja").read_text()

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
ARGS = {"city": "Paris", "days": 3}
ARGS_TEXT = json.dumps(ARGS)
CALL_JSON = json.dumps({"name": "get_weather", "arguments": ARGS})

#: Replies that are only a call, written in a shape the grammar does not read, and the
#: notice that names the recovery.
DRIFTED = {
    "bare-json": (CALL_JSON, "recovered-bare-json"),
    "fence": (f"```json\n{CALL_JSON}\n```", "recovered-fenced-json"),
    "unclosed-tag": (f"<tool_call>\n{CALL_JSON}\n", "recovered-unclosed-tag"),
}


def _request(**options: Any) -> Request:
    return Request(
        [{"role": "user", "content": "Weather in Paris for 3 days?"}], [WEATHER], **options
    )


def _run(backend: Any, request: Request) -> list[Any]:
    return list(stream_sync(backend.stream(request)))


def _calls(events: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """The calls as a caller runs them: arguments through the argument pipeline."""
    out = []
    for event in events:
        if isinstance(event, CallEnd):
            call = event.call
            raw = call.arguments_text or call.arguments
            typed = prepare_arguments(
                raw,
                WEATHER["function"]["parameters"],  # type: ignore[index]
                text_values=call.text_values,
            )
            out.append((call.name, typed.arguments))
    return out


def _codes(events: list[Any]) -> list[str]:
    return [e.code for e in events if isinstance(e, Notice)]


def _messages(events: list[Any]) -> dict[str, str]:
    return {e.code: e.message for e in events if isinstance(e, Notice)}


def _text(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


Transport = Callable[[FakeOpenAIServer, str, ModelMemory], Any]


def _openai(server: FakeOpenAIServer, reply: str, memory: ModelMemory) -> Any:
    server.add_stream(text_deltas(reply, 4))
    return OpenAIBackend("m", base_url=server.base_url, memory=memory)


def _ollama(server: FakeOpenAIServer, reply: str, memory: ModelMemory) -> Any:
    server.add_ollama([{"content": d["content"]} for d in text_deltas(reply, 4)])
    return OllamaBackend("m", base_url=server.ollama_url, memory=memory)


def _local(server: FakeOpenAIServer, reply: str, memory: ModelMemory) -> Any:
    del server
    return LlamaCppBackend("scripted", llama=ScriptedLlama(HERMES_TEMPLATE, reply), memory=memory)


TRANSPORTS = {"openai": _openai, "ollama": _ollama, "local": _local}


@pytest.fixture()
def server() -> Any:
    with FakeOpenAIServer() as s:
        yield s


@pytest.mark.parametrize("shape", sorted(DRIFTED))
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_a_drifted_call_is_recovered_alike_through_every_transport(
    server: FakeOpenAIServer, transport: str, shape: str
) -> None:
    reply, code = DRIFTED[shape]
    events = _run(TRANSPORTS[transport](server, reply, ModelMemory()), _request())
    assert _calls(events) == [("get_weather", ARGS)]
    assert _text(events) == ""
    assert code in _codes(events)
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "tool_calls"


@pytest.mark.parametrize("shape", sorted(DRIFTED))
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_strict_leaves_a_drifted_call_as_text_through_every_transport(
    server: FakeOpenAIServer, transport: str, shape: str
) -> None:
    reply, code = DRIFTED[shape]
    events = _run(TRANSPORTS[transport](server, reply, ModelMemory()), _request(strict=True))
    assert _calls(events) == []
    assert _text(events) == reply
    assert code not in _codes(events)
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "stop"


def test_a_native_call_is_the_same_call_through_every_transport(server: FakeOpenAIServer) -> None:
    server.add_stream(tool_call_deltas([("call_1", "get_weather", ARGS_TEXT)]))
    server.add_ollama(
        [{"content": "", "tool_calls": [{"function": {"name": "get_weather", "arguments": ARGS}}]}]
    )
    memory = ModelMemory()
    hermes = f"<tool_call>\n{CALL_JSON}\n</tool_call>"
    backends = [
        OpenAIBackend("m", base_url=server.base_url, memory=memory),
        OllamaBackend("m", base_url=server.ollama_url, memory=memory),
        LlamaCppBackend("scripted", llama=ScriptedLlama(HERMES_TEMPLATE, hermes), memory=memory),
    ]
    for backend in backends:
        events = _run(backend, _request())
        assert _calls(events) == [("get_weather", ARGS)], backend.name
        assert _text(events) == ""
        assert not [c for c in _codes(events) if c.startswith("recovered")]
        assert isinstance(events[-1], Done) and events[-1].finish_reason == "tool_calls"


@pytest.mark.parametrize("remote", ["openai", "ollama"])
def test_a_model_that_takes_no_tools_is_healed_into_words_and_remembered(
    server: FakeOpenAIServer, remote: str
) -> None:
    memory = ModelMemory()
    words_reply = f"<tool_call>\n{CALL_JSON}\n</tool_call>"
    refusal = "registry.ollama.ai/library/gemma:2b does not support tools"
    if remote == "openai":
        server.add_error(400, {"message": refusal})
        server.add_error(400, {"message": refusal})  # the gateway's probe, refused alike
        backend: Any = OpenAIBackend("m", base_url=server.base_url, memory=memory)
        server.add_stream(text_deltas(words_reply, 5))
        server.add_stream(text_deltas(words_reply, 5))
    else:
        server.add_error(400, refusal)
        server.add_error(400, refusal)  # the gateway's probe, refused alike
        backend = OllamaBackend("m", base_url=server.ollama_url, memory=memory)
        server.add_ollama([{"content": words_reply}])
        server.add_ollama([{"content": words_reply}])
    events = _run(backend, _request())
    assert _calls(events) == [("get_weather", ARGS)]
    assert _text(events) == ""
    assert "learned from a probe" in _messages(events)["healed-tools"]
    first, probe, second = server.requests
    assert probe["tools"][0]["function"]["name"] == "toolwire_probe"
    assert "tools" in first and "tools" not in second
    assert "get_weather" in second["messages"][0]["content"]  # the tools, in words
    # remembered: the next turn goes straight to words, and says why
    again = _run(backend, _request())
    assert _calls(again) == [("get_weather", ARGS)]
    assert "tools-in-words" in _codes(again) and "healed-tools" not in _codes(again)
    assert "tools" not in server.requests[3]
    assert memory.recall(backend.endpoint, "m").words
    assert memory.recall(backend.endpoint, "m").source == "probe"


@pytest.mark.parametrize("remote", ["openai", "ollama"])
def test_a_model_that_takes_the_probe_is_healed_into_words_for_that_request_only(
    server: FakeOpenAIServer, remote: str
) -> None:
    memory = ModelMemory()
    words_reply = f"<tool_call>\n{CALL_JSON}\n</tool_call>"
    native = tool_call_deltas([("call_1", "get_weather", ARGS_TEXT)])
    refusal = "registry.ollama.ai/library/gemma:2b does not support tools"
    if remote == "openai":
        server.add_error(400, {"message": refusal})
        server.add_stream(text_deltas("ok"))  # the probe is taken: the model takes tools
        backend: Any = OpenAIBackend("m", base_url=server.base_url, memory=memory)
        server.add_stream(text_deltas(words_reply, 5))
        server.add_stream(native)
    else:
        server.add_error(400, refusal)
        server.add_ollama([{"content": "ok"}])
        backend = OllamaBackend("m", base_url=server.ollama_url, memory=memory)
        server.add_ollama([{"content": words_reply}])
        server.add_ollama(
            [
                {
                    "content": "",
                    "tool_calls": [{"function": {"name": "get_weather", "arguments": ARGS}}],
                }
            ]
        )
    events = _run(backend, _request())
    assert _calls(events) == [("get_weather", ARGS)]
    assert "for this request only" in _messages(events)["healed-tools"]
    assert not memory.recall(backend.endpoint, "m").words
    again = _run(backend, _request())  # the next request: its tools natively
    assert _calls(again) == [("get_weather", ARGS)]
    assert "tools-in-words" not in _codes(again) and "tools" in server.requests[3]


def test_a_refused_schema_is_healed_once_alike_for_openai_and_ollama(
    server: FakeOpenAIServer,
) -> None:
    memory = ModelMemory()
    nested = {
        **WEATHER,
        "function": {
            **WEATHER["function"],  # type: ignore[dict-item]
            "parameters": {
                "type": "object",
                "properties": {"city": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
                "additionalProperties": False,
            },
        },
    }
    request = Request([{"role": "user", "content": "hi"}], [nested])
    server.add_error(400, {"message": "Invalid schema for function: anyOf is not supported"})
    server.add_error(400, {"message": "Invalid schema for function: anyOf is not supported"})
    server.add_stream(text_deltas("sunny"))
    server.add_error(400, "invalid schema: unsupported keyword additionalProperties")
    server.add_error(400, "invalid schema: unsupported keyword additionalProperties")
    server.add_ollama([{"content": "sunny"}])
    for backend in (
        OpenAIBackend("m", base_url=server.base_url, memory=memory),
        OllamaBackend("m", base_url=server.ollama_url, memory=memory),
    ):
        events = _run(backend, request)
        assert _text(events) == "sunny"
        assert "healed-schema" in _codes(events)
        assert memory.recall(backend.endpoint, "m").dialect == "strict"
    probes = [server.requests[1], server.requests[4]]  # refused alike: the lesson stands
    assert all(p["tools"][0]["function"]["name"] == "toolwire_probe" for p in probes)
    sent_again = [server.requests[2], server.requests[5]]
    for body in sent_again:
        params = body["tools"][0]["function"]["parameters"]
        assert "anyOf" not in json.dumps(params)


def test_a_second_refusal_of_the_same_kind_is_not_healed_again(server: FakeOpenAIServer) -> None:
    server.add_error(400, {"message": "invalid schema: anyOf"})
    server.add_stream(text_deltas("ok"))  # the probe
    server.add_error(400, {"message": "invalid schema: anyOf"})
    backend = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    with pytest.raises(BackendError):
        _run(backend, _request())
    assert len(server.requests) == 3


def test_memory_is_keyed_by_endpoint_and_model(server: FakeOpenAIServer) -> None:
    memory = ModelMemory()
    with FakeOpenAIServer() as other:
        server.add_error(400, "m does not support tools")
        server.add_error(400, "m does not support tools")  # the probe, refused alike
        server.add_ollama([{"content": "ok"}])
        _run(OllamaBackend("m", base_url=server.ollama_url, memory=memory), _request())
        other.add_ollama([{"content": "ok"}])
        _run(OllamaBackend("m", base_url=other.ollama_url, memory=memory), _request())
        assert "tools" in other.requests[0]  # the same name elsewhere was never refused
    assert memory.recall(server.ollama_url, "m").words
    assert not memory.recall(other.ollama_url, "m").words


def test_model_memory_is_bounded_resettable_and_persists(tmp_path: Path) -> None:
    memory = ModelMemory(max_models=2)
    memory.learn("a", "m", words=True)
    memory.learn("b", "m", dialect="strict")
    memory.recall("a", "m")  # a is now the most recent
    memory.learn("c", "m", words=True)
    assert len(memory) == 2
    assert not memory.recall("b", "m").words and memory.recall("b", "m").dialect is None
    path = tmp_path / "memory.json"
    memory.save(path)
    loaded = ModelMemory.load(path)
    assert loaded.recall("a", "m").words and loaded.recall("c", "m").words
    memory.reset()
    assert len(memory) == 0
    with pytest.raises(UsageError):
        ModelMemory.from_json([{"endpoint": "a", "model": 3}])
    with pytest.raises(UsageError):
        memory.learn("a", "m", dialect="loose")
    with pytest.raises(UsageError):
        ModelMemory(max_models=0)


def test_backends_made_without_a_memory_share_the_process_default(
    server: FakeOpenAIServer,
) -> None:
    from toolwire.pipeline import default_memory

    default_memory().reset()
    try:
        server.add_error(400, "m does not support tools")
        server.add_error(400, "m does not support tools")  # the probe, refused alike
        server.add_ollama([{"content": "ok"}])
        _run(OllamaBackend("m", base_url=server.ollama_url), _request())
        assert default_memory().recall(server.ollama_url, "m").words
        assert OpenAIBackend("m").memory is default_memory()
    finally:
        default_memory().reset()


def test_a_local_model_without_a_tool_format_gets_its_tools_in_words_and_says_so() -> None:
    chatml = (FIXTURES / "llama-cpp-rwkv-world.jinja").read_text()
    reply = f"<tool_call>\n{CALL_JSON}\n</tool_call>"
    llama = ScriptedLlama(chatml, reply)
    events = _run(LlamaCppBackend("scripted", llama=llama, memory=ModelMemory()), _request())
    assert _calls(events) == [("get_weather", ARGS)]
    assert "tools-in-words" in _codes(events)
    assert "get_weather" in llama.prompts[0]


def test_the_conversations_format_none_gives_words_through_every_transport(
    server: FakeOpenAIServer,
) -> None:
    reply = f"<tool_call>\n{CALL_JSON}\n</tool_call>"
    for make in TRANSPORTS.values():
        events = _run(make(server, reply, ModelMemory()), _request(tool_format="none"))
        assert _calls(events) == [("get_weather", ARGS)]
        assert "tools-in-words" in _codes(events)
    # neither remote request carried native tools
    assert all("tools" not in body for body in server.requests)


# --------------------------------------------------------------------- arguments typed once

FLAGGED = {
    "type": "function",
    "function": {
        "name": "set_alarm",
        "parameters": {
            "type": "object",
            "properties": {"hour": {"type": "integer"}, "loud": {"type": "boolean"}},
            "required": ["hour", "loud"],
        },
    },
}
XML_CALL = (
    "<tool_call>\n<function=set_alarm>\n<parameter=hour>\n7\n</parameter>\n"
    "<parameter=loud>\nFalse\n</parameter>\n</function>\n</tool_call>"
)


def _xml_call() -> Any:
    llama = ScriptedLlama(XML_TEMPLATE, XML_CALL)
    events = _run(
        LlamaCppBackend("scripted", llama=llama, memory=ModelMemory()),
        Request([{"role": "user", "content": "wake me"}], [FLAGGED]),
    )
    (call,) = [e.call for e in events if isinstance(e, CallEnd)]
    return call


def test_a_qwen_xml_python_literal_is_a_named_repair_that_strict_refuses() -> None:
    call = _xml_call()
    schema = FLAGGED["function"]["parameters"]  # type: ignore[index]
    done = prepare_arguments(call.arguments_text, schema, text_values=call.text_values)
    assert done.arguments == {"hour": 7, "loud": False}
    assert done.repairs == ("python-literals",)
    with pytest.raises(ArgumentsError) as refused:
        prepare_arguments(call.arguments_text, schema, text_values=True, strict=True)
    assert "loud" in refused.value.explanation


def test_a_qwen_xml_integer_is_the_grammar_not_a_repair() -> None:
    schema = FLAGGED["function"]["parameters"]  # type: ignore[index]
    done = prepare_arguments({"hour": "7", "loud": "false"}, schema, text_values=True, strict=True)
    assert done.arguments == {"hour": 7, "loud": False}
    assert done.repairs == ()


# --------------------------------------------------------------------- the whole round trip


CALCULATOR_JSON = '{"name": "calculator", "arguments": {"expression": "17*23"}}'


@pytest.mark.parametrize("remote", ["openai", "ollama"])
def test_chat_runs_a_bare_json_call_alike_through_openai_and_ollama(
    server: FakeOpenAIServer, remote: str
) -> None:
    import io

    from toolwire.chat import chat

    if remote == "openai":
        server.add_stream(text_deltas(CALCULATOR_JSON, 6))
        server.add_stream(text_deltas("17*23 is 391."))
        backend: Any = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    else:
        server.add_ollama([{"content": d["content"]} for d in text_deltas(CALCULATOR_JSON, 6)])
        server.add_ollama([{"content": "17*23 is 391."}])
        backend = OllamaBackend("m", base_url=server.ollama_url, memory=ModelMemory())
    out = io.StringIO()
    assert chat(backend, once="What is 17*23? Use the calculator.", out=out) == 0
    shown = out.getvalue()
    assert "→ calculator(" in shown and "← 391" in shown
    assert shown.rstrip().endswith("17*23 is 391.")
    assert CALCULATOR_JSON not in shown  # the call is not shown as the answer
    # the result went back as the model's transport encodes it
    followup = server.requests[1]["messages"]
    assert followup[-1]["role"] == "tool" and followup[-1]["content"] == "391"


def test_strict_refuses_a_qwen_xml_python_literal_in_the_loop_and_tells_the_model() -> None:
    from toolwire import Conversation, Toolbox, ToolResult, run_loop_sync

    box = Toolbox()
    ran: list[dict[str, Any]] = []

    @box.tool()
    def set_alarm(hour: int, loud: bool) -> str:
        """Set an alarm.

        Args:
            hour: The hour.
            loud: Ring loudly.
        """
        ran.append({"hour": hour, "loud": loud})
        return "set"

    results = {}
    for strict in (False, True):
        llama = ScriptedLlama(XML_TEMPLATE, XML_CALL, "Done.")
        backend = LlamaCppBackend("scripted", llama=llama, memory=ModelMemory())
        conversation = Conversation(settings={"strict": strict})
        conversation.add_user("wake me at 7, quietly")
        events = list(run_loop_sync(backend, conversation, box))
        (result,) = [e for e in events if isinstance(e, ToolResult)]
        results[strict] = result
    assert results[False].status == "ok" and ran == [{"hour": 7, "loud": False}]
    assert results[True].status == "invalid" and "loud" in results[True].content
    assert len(ran) == 1  # strict never ran it


def test_a_call_written_in_the_last_turn_without_tools_is_named_not_shown_silently(
    server: FakeOpenAIServer,
) -> None:
    from toolwire import Conversation, Toolbox, ToolRun, run_loop_sync

    box = Toolbox()

    @box.tool(read_only=True)
    def calculator(expression: str) -> str:
        """Arithmetic.

        Args:
            expression: The sum.
        """
        return "391"

    server.add_stream(text_deltas(CALCULATOR_JSON, 6))
    conversation = Conversation(settings={"max_tool_iters": 0})
    conversation.add_user("What is 17*23?")
    backend = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    events = list(run_loop_sync(backend, conversation, box))
    assert "tools" not in server.requests[0]  # the last turn offers none
    assert _text(events) == CALCULATOR_JSON  # the answer, as the model wrote it
    assert _codes(events) == ["call-without-tools"]  # said once, by the pipeline
    (notice,) = [e for e in events if isinstance(e, Notice)]
    assert "calculator" in notice.message and "nothing was run" in notice.message
    assert not [e for e in events if isinstance(e, (CallEnd, ToolRun))]


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_a_reply_that_opens_with_a_call_and_goes_on_is_text_and_says_so(
    server: FakeOpenAIServer, transport: str
) -> None:
    # what the default model writes after a tool result: its call again, then the result
    reply = '{"name": "get_weather", "arguments": {"city": "Paris"}}\n{"forecast": "sunny"}'
    events = _run(TRANSPORTS[transport](server, reply, ModelMemory()), _request())
    assert _calls(events) == [] and _text(events) == reply
    assert _codes(events) == ["call-not-read"]
    (notice,) = [e for e in events if isinstance(e, Notice)]
    assert "get_weather" in notice.message
