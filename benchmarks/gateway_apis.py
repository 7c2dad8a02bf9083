"""The four client APIs of the gateway benchmark: each one's request and the check of its
reply (see gateway.py).

Every API asks the same question with the same tool and a ticket of its own, and every
reply must carry exactly one ``get_weather`` call with that ticket in its id and arguments:
a reply cut, mixed with another or shaped wrongly is a failure, never dropped. ``chat`` is
also how the upstream is called directly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

PARAMETERS = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"},
    },
    "required": ["city"],
}
DESCRIPTION = "The weather in a city, for the next few days."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": DESCRIPTION,
            "parameters": PARAMETERS,
        },
    }
]
SYSTEM = "You answer questions about the weather."
APIS = ("chat", "responses", "messages", "gemini")
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def path(api: str, stream: bool) -> str:
    """Where ``api``'s request goes (Gemini's names its model and method, streamed or not)."""
    if api == "gemini":
        return "/v1beta/models/up-model:" + (
            "streamGenerateContent?alt=sse" if stream else "generateContent"
        )
    return PATHS[api]


def question(ticket: str) -> str:
    return f"What will the weather be in Paris for the next 3 days? (request {ticket})"


def arguments(ticket: str) -> dict[str, Any]:
    """The call's arguments in the reply to the request carrying ``ticket``."""
    return {"city": f"Paris {ticket}", "unit": "celsius", "days": 3}


def call_id(ticket: str) -> str:
    return f"call_{ticket.replace('-', '_')}"


def ask(api: str, ticket: str, stream: bool, model: str = "up-model") -> bytes:
    """The request body of ``api``: one tool, a question that carries ``ticket``."""
    if api == "chat":
        body: dict[str, Any] = {
            "model": model,
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": question(ticket)},
            ],
            "tools": TOOLS,
            "stream": stream,
        }
    elif api == "responses":
        body = {
            "model": model,
            "instructions": SYSTEM,
            "input": question(ticket),
            "tools": [
                {
                    "type": "function",
                    "name": "get_weather",
                    "description": DESCRIPTION,
                    "parameters": PARAMETERS,
                }
            ],
            "stream": stream,
            "store": False,
        }
    elif api == "gemini":
        body = {
            "systemInstruction": {"parts": [{"text": SYSTEM}]},
            "contents": [{"role": "user", "parts": [{"text": question(ticket)}]}],
            "tools": [
                {
                    "functionDeclarations": [
                        {
                            "name": "get_weather",
                            "description": DESCRIPTION,
                            "parametersJsonSchema": PARAMETERS,
                        }
                    ]
                }
            ],
        }
    else:
        body = {
            "model": model,
            "max_tokens": 256,
            "system": SYSTEM,
            "messages": [{"role": "user", "content": question(ticket)}],
            "tools": [
                {"name": "get_weather", "description": DESCRIPTION, "input_schema": PARAMETERS}
            ],
            "stream": stream,
        }
    return json.dumps(body).encode()


class Wrong(Exception):
    """A reply that is not what it must be."""


def _events(data: bytes, last: str) -> list[tuple[str, Any]]:
    """A stream's events as (name, data) pairs; it must end with ``last``."""
    text = data.decode()
    if not text.rstrip().endswith(last):
        raise Wrong(f"the stream does not end with {last!r}: ...{text[-120:]!r}")
    out: list[tuple[str, Any]] = []
    for block in text.split("\n\n"):
        name, payload = "", None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: ") and line != "data: [DONE]":
                payload = json.loads(line[6:])
        if payload is not None:
            if "error" in payload or name == "error":
                raise Wrong(f"an error event: {block[:160]!r}")
            out.append((name, payload))
    return out


def _chat(stream: bool, data: bytes) -> tuple[str, list[str], str, str | None]:
    if not stream:
        choice = json.loads(data)["choices"][0]
        calls = choice["message"].get("tool_calls") or []
        if len(calls) != 1:
            raise Wrong(f"{len(calls)} tool calls, not 1: {data[:160]!r}")
        function = calls[0]["function"]
        return function["name"], [calls[0]["id"]], function["arguments"], choice["finish_reason"]
    name, ids, pieces, finish = "", [], [], None
    for _, chunk in _events(data, "data: [DONE]"):
        for choice in chunk["choices"]:
            for tc in choice["delta"].get("tool_calls") or ():
                if tc.get("id"):
                    ids.append(tc["id"])
                name += tc["function"].get("name") or ""
                pieces.append(tc["function"].get("arguments") or "")
            finish = choice.get("finish_reason") or finish
    return name, ids, "".join(pieces), finish


def _responses(stream: bool, data: bytes) -> tuple[str, list[str], str, str | None]:
    if stream:
        events = _events(data, "}")
        if events[-1][0] != "response.completed":
            raise Wrong(f"the last event is {events[-1][0]!r}")
        response = events[-1][1]["response"]
        done = [e["item"] for n, e in events if n == "response.output_item.done"]
        if [i.get("call_id") for i in done] != [i.get("call_id") for i in response["output"]]:
            raise Wrong("the streamed items are not the completed response's")
    else:
        response = json.loads(data)
    calls = [item for item in response["output"] if item["type"] == "function_call"]
    if len(calls) != 1:
        raise Wrong(f"{len(calls)} function calls, not 1: {data[:160]!r}")
    finish = "tool_calls" if response["status"] == "completed" else response["status"]
    return calls[0]["name"], [calls[0]["call_id"]], calls[0]["arguments"], finish


def _messages(stream: bool, data: bytes) -> tuple[str, list[str], str, str | None]:
    if not stream:
        message = json.loads(data)
        uses = [block for block in message["content"] if block["type"] == "tool_use"]
        if len(uses) != 1:
            raise Wrong(f"{len(uses)} tool_use blocks, not 1: {data[:160]!r}")
        stop = "tool_calls" if message["stop_reason"] == "tool_use" else message["stop_reason"]
        return uses[0]["name"], [uses[0]["id"]], json.dumps(uses[0]["input"]), stop
    events = _events(data, "}")
    if events[-1][0] != "message_stop":
        raise Wrong(f"the last event is {events[-1][0]!r}")
    name, ids, pieces, stop = "", [], [], None
    for kind, event in events:
        if kind == "content_block_start" and event["content_block"]["type"] == "tool_use":
            name += event["content_block"]["name"]
            ids.append(event["content_block"]["id"])
        elif kind == "content_block_delta" and event["delta"]["type"] == "input_json_delta":
            pieces.append(event["delta"]["partial_json"])
        elif kind == "message_delta":
            stop = event["delta"]["stop_reason"]
    return name, ids, "".join(pieces), "tool_calls" if stop == "tool_use" else stop


def _gemini(stream: bool, data: bytes) -> tuple[str, list[str], str, str | None]:
    chunks = [e for _, e in _events(data, "}")] if stream else [json.loads(data)]
    calls, reason = [], None
    for chunk in chunks:
        candidate = chunk["candidates"][0]
        calls += [p["functionCall"] for p in candidate["content"]["parts"] if "functionCall" in p]
        reason = candidate.get("finishReason") or reason
    if len(calls) != 1:
        raise Wrong(f"{len(calls)} function calls, not 1: {data[:160]!r}")
    finish = "tool_calls" if reason == "STOP" else reason
    return calls[0]["name"], [calls[0]["id"]], json.dumps(calls[0]["args"]), finish


_READERS: dict[str, Callable[[bool, bytes], tuple[str, list[str], str, str | None]]] = {
    "chat": _chat,
    "responses": _responses,
    "messages": _messages,
    "gemini": _gemini,
}


def check(api: str, stream: bool, ticket: str, status: int, data: bytes) -> str | None:
    """Why a reply is wrong, or None: one get_weather call, the request's own ticket in its
    id and arguments, and the turn ended for the call."""
    if status != 200:
        return f"status {status}: {data[:160]!r}"
    try:
        name, ids, text, finish = _READERS[api](stream, data)
        args = json.loads(text)
    except Wrong as exc:
        return str(exc)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        return f"unreadable reply ({type(exc).__name__}: {exc}): {data[:160]!r}"
    if name != "get_weather":
        return f"the call is named {name!r}"
    if ids != [call_id(ticket)] or args != arguments(ticket):
        return f"MIXED: request {ticket} got call {ids} with {args!r}"
    if finish != "tool_calls":
        return f"the turn ended with {finish!r}"
    return None
