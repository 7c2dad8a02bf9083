"""An OpenAI-compatible upstream over real HTTP whose refusals quote the client's request,
as providers' error messages do, and one that refuses with a machine code.

``Quoting``: a tool whose description names a forbidden word is refused with a 400 whose
message quotes that description (and no code); any other request gets a short streamed
answer. ``Coded``: a tool schema with ``anyOf`` is refused as OpenAI refuses it
(``invalid_function_parameters``); ``NoTools``: every request with tools is refused in
words, as Ollama refuses a model without tools. ``ItemsRequired`` and ``NoRequiredChoice``
refuse an honest client's own request with OpenAI's codes, though the model takes tools and
the keywords: an array without ``items`` (``invalid_function_parameters``), a
``tool_choice`` of ``required`` (``unsupported_value``). Each keeps every body it was sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

PROBE_NAME = "toolwire_probe"


def _chunk(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"


def _answer(text: str) -> StreamingResponse:
    def chunks() -> Iterator[str]:
        yield _chunk({"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]})
        yield _chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        yield "data: [DONE]\n\n"

    return StreamingResponse(chunks(), media_type="text/event-stream")


class Upstream:
    """The bodies it was sent, and how many of them were the gateway's probes."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])

    @property
    def probes(self) -> list[dict[str, Any]]:
        return [b for b in self.bodies if PROBE_NAME in _names(b)]

    @property
    def clients(self) -> list[dict[str, Any]]:
        return [b for b in self.bodies if PROBE_NAME not in _names(b)]

    async def chat(self, request: HttpRequest) -> Response:
        body = await request.json()
        self.bodies.append(body)
        refusal = self.refuse(body)
        if refusal is not None:
            status, error = refusal
            return JSONResponse(error, status_code=status)
        return _answer("ok")

    def refuse(self, body: dict[str, Any]) -> tuple[int, Any] | None:
        raise NotImplementedError


class Quoting(Upstream):
    """Refuses a tool described with ``word``, quoting its description in the message."""

    def __init__(self, word: str = "forbidden", needs: str = "") -> None:
        super().__init__()
        self.word, self.needs = word, needs  # needs: refused only with this in the schema

    def refuse(self, body: dict[str, Any]) -> tuple[int, Any] | None:
        for tool in body.get("tools") or []:
            description = tool["function"].get("description", "")
            schema = json.dumps(tool["function"].get("parameters", {}))
            if self.word in description.lower() and self.needs in schema:
                message = f"Tool description rejected by the content policy: {description!r}"
                error = {"message": message, "type": "invalid_request_error", "param": None}
                return 400, {"error": {**error, "code": None}}
        return None


class Coded(Upstream):
    """Refuses a tool schema with ``anyOf`` as OpenAI does: status 400, a machine code."""

    def refuse(self, body: dict[str, Any]) -> tuple[int, Any] | None:
        for i, tool in enumerate(body.get("tools") or []):
            if "anyOf" in json.dumps(tool["function"].get("parameters", {})):
                error = {
                    "message": f"Invalid schema for function '{tool['function']['name']}'.",
                    "type": "invalid_request_error",
                    "param": f"tools[{i}].function.parameters",
                    "code": "invalid_function_parameters",
                }
                return 400, {"error": error}
        return None


class NoTools(Upstream):
    """Refuses every request with tools in words only, as Ollama does for such a model."""

    def refuse(self, body: dict[str, Any]) -> tuple[int, Any] | None:
        if body.get("tools"):
            return 400, {
                "error": f"registry.ollama.ai/library/{body['model']} does not support tools"
            }
        return None


class ItemsRequired(Upstream):
    """Refuses a tool schema with an array that has no ``items``, as OpenAI does: the
    client's schema is at fault, and the model takes every keyword."""

    def refuse(self, body: dict[str, Any]) -> tuple[int, Any] | None:
        for i, tool in enumerate(body.get("tools") or []):
            if _itemless(tool["function"].get("parameters", {})):
                error = {
                    "message": f"Invalid schema for function '{tool['function']['name']}': "
                    "array schema missing items.",
                    "type": "invalid_request_error",
                    "param": f"tools[{i}].function.parameters",
                    "code": "invalid_function_parameters",
                }
                return 400, {"error": error}
        return None


class NoRequiredChoice(Upstream):
    """Refuses ``tool_choice: "required"`` with OpenAI's ``unsupported_value``; any other
    request with tools is taken."""

    def refuse(self, body: dict[str, Any]) -> tuple[int, Any] | None:
        if body.get("tools") and body.get("tool_choice") == "required":
            error = {
                "message": "Unsupported value: 'tool_choice' does not support 'required' "
                "with this model.",
                "type": "invalid_request_error",
                "param": "tool_choice",
                "code": "unsupported_value",
            }
            return 400, {"error": error}
        return None


def _itemless(schema: Any) -> bool:
    """Is there an array without ``items`` anywhere in ``schema``?"""
    if isinstance(schema, dict):
        if schema.get("type") == "array" and "items" not in schema:
            return True
        return any(_itemless(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_itemless(v) for v in schema)
    return False


def _names(body: dict[str, Any]) -> list[str]:
    return [t.get("function", {}).get("name", "") for t in body.get("tools") or []]
