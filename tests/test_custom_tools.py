"""Responses ``custom`` and ``namespace`` tools, as Codex sends them: ``apply_patch`` as a
custom tool with a Lark grammar, MCP tools in a namespace. Offered to the model as functions
it can write, their calls given back as the client declared them (a ``custom_tool_call``
with its ``input``; a ``function_call`` with the bare ``name`` and its ``namespace``), and
both accepted in the history — through the real gateway, with the official ``openai``
client, in front of a fake upstream over real HTTP and on the real local model."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.server import create_app
from toolwire.server.core import WireCall
from toolwire.server.responses_input import parse_responses
from toolwire.server.responses_items import (
    ClientTool,
    argument_events,
    call_item,
    done_value,
    said,
    streams_arguments,
)
from toolwire.server.responses_tools import safe_pattern
from toolwire.server.validate import RequestError
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas, tool_call_deltas

#: Codex 0.171's apply_patch tool, as it sends it (its grammar transcribed from a capture).
LARK = (
    'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\n'
    'end_patch: "*** End Patch" LF?\n\nhunk: add_hunk | delete_hunk | update_hunk\n'
    'add_hunk: "*** Add File: " filename LF add_line+\ndelete_hunk: "*** Delete File: " '
    'filename LF\nupdate_hunk: "*** Update File: " filename LF change_move? change?\n\n'
    'filename: /(.+)/\nadd_line: "+" /(.*)/ LF -> line\n\nchange_move: "*** Move to: " '
    'filename LF\nchange: (change_context | change_line)+ eof_line?\nchange_context: ("@@" | '
    '"@@ " /(.+)/) LF\nchange_line: ("+" | "-" | " ") /(.*)/ LF\neof_line: "*** End of File" '
    "LF\n\n%import common.LF\n"
)
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "The `apply_patch` tool can be used to edit files. This is a FREEFORM tool, "
    "so do not wrap the patch in JSON.",
    "format": {"type": "grammar", "syntax": "lark", "definition": LARK},
}
CALC_PARAMS = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}, "op": {"type": "string"}},
    "required": ["a", "b"],
}
MCP = {
    "type": "namespace",
    "name": "mcp__calc",
    "description": "Tools in the mcp__calc namespace.",
    "tools": [
        {
            "type": "function",
            "name": "calculator",
            "description": "Computes a op b.",
            "strict": False,
            "defer_loading": True,
            "parameters": CALC_PARAMS,
        }
    ],
}
SHELL = {
    "type": "function",
    "name": "exec_command",
    "description": "Runs a command.",
    "strict": False,
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"


def parse(body: dict[str, Any]) -> Any:
    return asyncio.run(parse_responses({"model": "m", **body}))


def engine_tools(call: Any) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in call.request.tools or ()}


# ------------------------------------------------------------------ parse level


def test_a_custom_tool_is_offered_as_a_function_of_one_string_with_its_grammar_said() -> None:
    call = parse({"input": "x", "tools": [SHELL, APPLY_PATCH, {"type": "web_search"}]})
    tools = engine_tools(call)
    assert set(tools) == {"exec_command", "apply_patch"}
    patch = tools["apply_patch"]
    assert patch["parameters"]["required"] == ["input"]
    assert patch["parameters"]["properties"]["input"]["type"] == "string"
    assert "pattern" not in patch["parameters"]["properties"]["input"]  # Lark: said only
    assert LARK in patch["description"] and "Lark grammar" in patch["description"]
    assert call.tools == {"apply_patch": ClientTool("custom", "apply_patch")}
    assert [n.code for n in call.notices] == ["tool-not-served"]  # web search alone


def test_a_regex_grammar_is_a_pattern_when_it_is_safe_to_check() -> None:
    def pattern(definition: str) -> str | None:
        tool = {
            "type": "custom",
            "name": "code",
            "format": {"type": "grammar", "syntax": "regex", "definition": definition},
        }
        got = engine_tools(parse({"input": "x", "tools": [tool]}))["code"]
        return got["parameters"]["properties"]["input"].get("pattern")

    assert pattern("[0-9]{3}-[A-Z]+") == "^([0-9]{3}-[A-Z]+)$"
    assert re.fullmatch(str(pattern("(ab|cd)[0-9]")), "cd7")
    for risky in ("(a+)+", "(a|aa)*b", "(x*)*", r"(a)\1", "(?=a)a", "a" * 2000, "([)"):
        assert pattern(risky) is None, risky
        assert safe_pattern(risky) is None
    assert safe_pattern("[(+]+x") == "^([(+]+x)$"  # a class's characters are not syntax


def test_namespace_tools_get_flat_names_within_64_characters_and_no_clash() -> None:
    long_space = {**MCP, "name": "mcp__" + "s" * 70}
    clash = {**SHELL, "name": "mcp__calc__calculator"}  # a plain function keeps its name
    call = parse({"input": "x", "tools": [MCP, clash, long_space]})
    names = list(engine_tools(call))
    assert names[0] == "mcp__calc__calculator_2"  # the namespaced one, given a suffix
    assert names[1] == "mcp__calc__calculator"  # the plain function's, as declared
    assert len(names[2]) == 64 and re.fullmatch(r"[A-Za-z0-9_-]+", names[2])
    assert call.tools["mcp__calc__calculator_2"] == ClientTool(
        "function", "calculator", "mcp__calc"
    )
    # the same request gives the same names
    assert list(engine_tools(parse({"input": "x", "tools": [MCP, clash, long_space]}))) == names


def test_history_custom_and_namespaced_calls_are_the_engine_calls_and_their_results() -> None:
    call = parse(
        {
            "tools": [APPLY_PATCH, MCP],
            "input": [
                {"role": "user", "content": "make hello.txt"},
                {
                    "type": "custom_tool_call",
                    "id": "ctc_1",
                    "status": "completed",
                    "call_id": "call_p",
                    "name": "apply_patch",
                    "input": PATCH,
                },
                {"type": "custom_tool_call_output", "call_id": "call_p", "output": "Done"},
                {
                    "type": "function_call",
                    "id": "fc_2",
                    "name": "calculator",
                    "namespace": "mcp__calc",
                    "arguments": '{"a": 2, "b": 3}',
                    "call_id": "call_2",
                },
                {
                    "type": "function_call_output",
                    "call_id": "call_2",
                    "output": [{"type": "input_text", "text": "5"}],
                },
            ],
        }
    )
    messages = call.request.messages
    patch, calc = messages[1]["tool_calls"][0], messages[3]["tool_calls"][0]
    assert patch["function"]["name"] == "apply_patch"
    assert json.loads(patch["function"]["arguments"]) == {"input": PATCH}
    assert messages[2] == {"role": "tool", "tool_call_id": "call_p", "content": "Done"}
    assert calc["function"]["name"] == "mcp__calc__calculator"
    assert messages[4]["content"] == "5"


@pytest.mark.parametrize(
    ("choice", "picked"),
    [
        ({"type": "custom", "name": "apply_patch"}, "apply_patch"),
        (
            {"type": "function", "name": "calculator", "namespace": "mcp__calc"},
            "mcp__calc__calculator",
        ),
        ({"type": "function", "name": "calculator"}, "mcp__calc__calculator"),  # one of that name
        ({"type": "function", "name": "mcp__calc__calculator"}, "mcp__calc__calculator"),
    ],
)
def test_tool_choice_names_a_custom_or_namespaced_tool(choice: dict[str, Any], picked: str) -> None:
    call = parse({"input": "x", "tools": [APPLY_PATCH, MCP, SHELL], "tool_choice": choice})
    assert [t["function"]["name"] for t in call.request.tools] == [picked]
    assert call.request.required


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tools": [{"type": "custom"}]}, "tools[0].name"),
        (
            {"tools": [{"type": "custom", "name": "p", "format": {"type": "x"}}]},
            "tools[0].format.type",
        ),
        ({"tools": [{"type": "namespace", "name": "n", "tools": "x"}]}, "tools[0].tools"),
        (
            {"tools": [APPLY_PATCH], "tool_choice": {"type": "custom", "name": "nope"}},
            "tool_choice",
        ),
        (
            {"input": [{"type": "custom_tool_call", "call_id": "c", "name": "p", "input": 3}]},
            "input[0].input",
        ),
        (
            {"input": [{"type": "custom_tool_call_output", "call_id": "c9", "output": "x"}]},
            "input[0].call_id",
        ),
        (
            {"tools": [{"type": "namespace", "name": "mcp__calc", "tools": [None]}]},
            "tools[0].tools[0]",
        ),
    ],
)
def test_malformed_custom_and_namespace_requests_name_the_field(
    body: dict[str, Any], field: str
) -> None:
    with pytest.raises(RequestError) as caught:
        parse({"input": "x", **body})
    assert caught.value.param == field


def test_the_items_and_events_of_a_custom_call() -> None:
    tool = ClientTool("custom", "apply_patch")
    wire = WireCall(0, "call_abc", "apply_patch", json.dumps({"input": PATCH}), {"input": PATCH})
    item = call_item(wire, tool)
    assert item == {
        "type": "custom_tool_call",
        "id": "ctc_abc",
        "call_id": "call_abc",
        "name": "apply_patch",
        "input": PATCH,
        "status": "completed",
    }
    assert call_item(wire, tool, "in_progress")["input"] == ""
    assert not streams_arguments(tool) and streams_arguments(None)
    assert argument_events(tool) == (
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "input",
    )
    assert done_value(wire, tool) == PATCH
    # a model that wrote the input bare, not as JSON: the text is the input
    bare = WireCall(0, "call_b", "apply_patch", PATCH, None)
    assert done_value(bare, tool) == PATCH
    # and back into the engine's call for a continuation
    back = said([item], {"apply_patch": tool})[0]["tool_calls"][0]
    assert json.loads(back["function"]["arguments"]) == {"input": PATCH}


def test_a_namespaced_call_item_carries_the_bare_name_and_its_namespace() -> None:
    tool = ClientTool("function", "calculator", "mcp__calc")
    wire = WireCall(0, "call_c", "mcp__calc__calculator", '{"a": 2, "b": 3}', {"a": 2, "b": 3})
    item = call_item(wire, tool)
    assert (item["type"], item["name"], item["namespace"]) == (
        "function_call",
        "calculator",
        "mcp__calc",
    )
    back = said([item], {"mcp__calc__calculator": tool})[0]["tool_calls"][0]
    assert back["function"]["name"] == "mcp__calc__calculator"


# ------------------------------------------------------------------ round trips


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def client(upstream: FakeOpenAIServer) -> Iterator[openai.OpenAI]:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)


def _reply(client: openai.OpenAI, stream: bool, **ask: Any) -> Any:
    if stream:
        with client.responses.stream(model="gw", **ask) as events:
            return events.get_final_response()
    return client.responses.create(model="gw", **ask)


#: The upstream's call of apply_patch: native, and written as text (Hermes tags).
PATCH_ARGS = json.dumps({"input": PATCH})
PATCH_REPLIES = {
    "native": tool_call_deltas([("call_p1", "apply_patch", PATCH_ARGS)]),
    "text": text_deltas(
        "<tool_call>\n"
        + json.dumps({"name": "apply_patch", "arguments": {"input": PATCH}})
        + "\n</tool_call>",
        size=7,
    ),
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("written", list(PATCH_REPLIES))
def test_a_custom_tool_call_comes_back_with_its_input(
    upstream: FakeOpenAIServer, client: openai.OpenAI, written: str, stream: bool
) -> None:
    upstream.add_stream(PATCH_REPLIES[written], finish_reason="tool_calls")
    response = _reply(client, stream, input="Create hello.txt", tools=[SHELL, APPLY_PATCH])
    calls = [o for o in response.output if o.type != "message"]
    assert len(calls) == 1 and calls[0].type == "custom_tool_call"
    assert (calls[0].name, calls[0].input) == ("apply_patch", PATCH)
    assert calls[0].call_id and calls[0].id.startswith("ctc_")
    # the upstream was offered a function of one string
    sent = {t["function"]["name"]: t["function"] for t in upstream.requests[0]["tools"]}
    assert sent["apply_patch"]["parameters"]["properties"]["input"]["type"] == "string"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_namespaced_call_comes_back_with_the_bare_name_and_namespace(
    upstream: FakeOpenAIServer, client: openai.OpenAI, stream: bool
) -> None:
    upstream.add_stream(
        tool_call_deltas([("call_m1", "mcp__calc__calculator", '{"a": 2, "b": 3}')]),
        finish_reason="tool_calls",
    )
    response = _reply(client, stream, input="Add 2 and 3", tools=[SHELL, MCP])
    call = next(o for o in response.output if o.type == "function_call")
    assert (call.name, call.namespace) == ("calculator", "mcp__calc")
    assert json.loads(call.arguments) == {"a": 2, "b": 3}
    names = [t["function"]["name"] for t in upstream.requests[0]["tools"]]
    assert names == ["exec_command", "mcp__calc__calculator"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_history_with_a_custom_call_and_its_output_continues(
    upstream: FakeOpenAIServer, client: openai.OpenAI, stream: bool
) -> None:
    upstream.add_stream(text_deltas("hello.txt is made."))
    history: list[Any] = [
        {"role": "user", "content": "Create hello.txt"},
        {"type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "call_p", "output": "Success."},
    ]
    response = _reply(client, stream, input=history, tools=[APPLY_PATCH])
    assert response.output_text == "hello.txt is made."
    sent = upstream.requests[0]["messages"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "apply_patch"
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == {"input": PATCH}
    assert sent[2] == {"role": "tool", "tool_call_id": "call_p", "content": "Success."}


def test_a_custom_tool_on_the_local_model_is_called_with_a_string_its_regex_constrains(
    llama_backend: Any,
) -> None:
    code = {
        "type": "custom",
        "name": "set_code",
        "description": "Sets the door code.",
        "format": {"type": "grammar", "syntax": "regex", "definition": "[0-9]{4}"},
    }
    with ServedApp(create_app(llama_backend, model_name="gw")) as served:
        local = openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)
        response = local.responses.create(
            model="gw",
            input="Set the door code to the words open sesame.",
            tools=[code],
            tool_choice={"type": "custom", "name": "set_code"},
            max_output_tokens=60,
        )
    call = next(o for o in response.output if o.type == "custom_tool_call")
    assert call.name == "set_code"
    assert re.fullmatch("[0-9]{4}", call.input), call.input


def _events(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """A streamed Responses reply's events, as sent."""
    out = []
    with httpx.stream("POST", url + "/v1/responses", json=body, timeout=30) as reply:
        for line in reply.iter_lines():
            if line.startswith("data: "):
                out.append(json.loads(line[6:]))
    return out


def test_a_streamed_custom_call_sends_its_input_in_the_custom_tool_events(
    upstream: FakeOpenAIServer,
) -> None:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    upstream.add_stream(PATCH_REPLIES["native"], finish_reason="tool_calls")
    with ServedApp(create_app(backend, model_name="gw")) as served:
        events = _events(
            served.url,
            {"model": "gw", "input": "x", "tools": [APPLY_PATCH], "stream": True},
        )
    kinds = [e["type"] for e in events]
    assert not any(k.startswith("response.function_call_arguments") for k in kinds)
    done = next(e for e in events if e["type"] == "response.custom_tool_call_input.done")
    assert done["input"] == PATCH
    deltas = [e["delta"] for e in events if e["type"] == "response.custom_tool_call_input.delta"]
    assert "".join(deltas) == PATCH
    added = next(e for e in events if e["type"] == "response.output_item.added")
    assert added["item"]["type"] == "custom_tool_call" and added["item"]["input"] == ""


TOOL_SEARCH = {
    "type": "tool_search",
    "execution": "client",
    "description": "Searches over deferred tool metadata and exposes matching tools.",
    "parameters": {
        "type": "object",
        "properties": {"limit": {"type": "number"}, "query": {"type": "string"}},
        "required": ["query"],
        "additionalProperties": False,
    },
}
#: Codex's MCP flow: the model searched for its tools; the search found the namespace.
SEARCHED: list[Any] = [
    {"role": "user", "content": "Use the calculator to add 2 and 3"},
    {
        "type": "tool_search_call",
        "id": "ts_1",
        "call_id": "ts_1",
        "status": "completed",
        "execution": "client",
        "arguments": {"query": "calculator"},
    },
    {
        "type": "tool_search_output",
        "call_id": "ts_1",
        "status": "completed",
        "execution": "client",
        "tools": [MCP],
    },
]


def test_a_client_tool_search_is_offered_and_what_it_found_is_offered_after() -> None:
    first = parse({"input": SEARCHED[:1], "tools": [SHELL, TOOL_SEARCH]})
    assert list(engine_tools(first)) == ["exec_command", "tool_search"]
    assert first.tools["tool_search"] == ClientTool("tool_search", "tool_search")
    later = parse({"input": SEARCHED, "tools": [SHELL, TOOL_SEARCH]})
    assert list(engine_tools(later)) == ["exec_command", "tool_search", "mcp__calc__calculator"]
    messages = later.request.messages
    search = messages[1]["tool_calls"][0]["function"]
    assert (search["name"], json.loads(search["arguments"])) == (
        "tool_search",
        {"query": "calculator"},
    )
    assert messages[2]["role"] == "tool" and "mcp__calc__calculator" in messages[2]["content"]
    # a hosted search is not the client's to run: left out, said so
    hosted = parse({"input": "x", "tools": [{"type": "tool_search"}]})
    assert hosted.request.tools is None and [n.code for n in hosted.notices] == ["tool-not-served"]


def test_a_deferred_tool_is_offered_once_a_search_found_it() -> None:
    """``defer_loading`` on a function, and on a namespace's function: not offered until a
    ``tool_search_output`` gives it; the tools not deferred stay offered throughout."""
    deferred = {**MCP, "tools": [{**t, "defer_loading": True} for t in MCP["tools"]]}
    lazy_shell = {**SHELL, "name": "lazy_shell", "defer_loading": True}
    tools = [SHELL, TOOL_SEARCH, deferred, lazy_shell]
    first = parse({"input": SEARCHED[:1], "tools": tools})
    assert list(engine_tools(first)) == ["exec_command", "tool_search"]
    later = parse({"input": SEARCHED, "tools": tools})
    assert list(engine_tools(later)) == ["exec_command", "tool_search", "mcp__calc__calculator"]
    whole = [{**MCP, "defer_loading": True}, SHELL, TOOL_SEARCH]
    assert list(engine_tools(parse({"input": SEARCHED[:1], "tools": whole}))) == [
        "exec_command",
        "tool_search",
    ]
    # with no search to load them, deferred tools are offered as they are
    assert "mcp__calc__calculator" in engine_tools(parse({"input": "x", "tools": [deferred]}))


def test_a_tool_search_call_comes_back_as_the_clients_item(
    upstream: FakeOpenAIServer, client: openai.OpenAI
) -> None:
    upstream.add_stream(
        tool_call_deltas([("call_s1", "tool_search", '{"query": "calculator"}')]),
        finish_reason="tool_calls",
    )
    response = client.responses.create(model="gw", input=SEARCHED[:1], tools=[SHELL, TOOL_SEARCH])
    item = response.output[0]
    assert item.type == "tool_search_call"
    assert (item.call_id, item.execution, item.arguments) == (
        "call_s1",
        "client",
        {"query": "calculator"},
    )


def test_after_a_tool_search_the_found_mcp_tool_is_called_by_its_bare_name(
    upstream: FakeOpenAIServer, client: openai.OpenAI
) -> None:
    upstream.add_stream(
        tool_call_deltas([("call_2", "mcp__calc__calculator", '{"a": 2, "b": 3}')]),
        finish_reason="tool_calls",
    )
    response = client.responses.create(model="gw", input=SEARCHED, tools=[SHELL, TOOL_SEARCH])
    call = response.output[0]
    assert (call.type, call.name, call.namespace) == ("function_call", "calculator", "mcp__calc")
    sent = upstream.requests[0]
    assert "mcp__calc__calculator" in [t["function"]["name"] for t in sent["tools"]]


def test_a_custom_tool_in_a_namespace_comes_back_with_its_namespace() -> None:
    exec_tool = {"type": "custom", "name": "exec", "description": "Runs JavaScript."}
    call = parse(
        {
            "input": "x",
            "tools": [{"type": "namespace", "name": "functions", "tools": [exec_tool]}],
        }
    )
    assert list(engine_tools(call)) == ["functions__exec"]
    tool = call.tools["functions__exec"]
    assert tool == ClientTool("custom", "exec", "functions")
    wire = WireCall(0, "call_x", "functions__exec", '{"input": "1+1"}', {"input": "1+1"})
    item = call_item(wire, tool)
    assert (item["type"], item["name"], item["namespace"], item["input"]) == (
        "custom_tool_call",
        "exec",
        "functions",
        "1+1",
    )


def test_a_streamed_tool_search_call_has_no_argument_events(upstream: FakeOpenAIServer) -> None:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    upstream.add_stream(
        tool_call_deltas([("call_s1", "tool_search", '{"query": "calculator"}')]),
        finish_reason="tool_calls",
    )
    body = {"model": "gw", "input": SEARCHED[:1], "tools": [SHELL, TOOL_SEARCH], "stream": True}
    with ServedApp(create_app(backend, model_name="gw")) as served:
        events = _events(served.url, body)
    kinds = [e["type"] for e in events]
    assert all(kinds) and not any("arguments" in k or "input" in k for k in kinds)
    done = next(e for e in events if e["type"] == "response.output_item.done")
    assert done["item"]["type"] == "tool_search_call"
    assert done["item"]["arguments"] == {"query": "calculator"}
