"""The engine alone: a BFCL case asked of an OpenAI-compatible engine with nothing in front.

BFCL's tools and questions go as they are, and its ``tool_calls`` are read as BFCL reads an
OpenAI function-calling model: text is no call, and arguments are a call only if BFCL's
``json.loads`` of them succeeds (the single-turn checker decides that; a multi-turn turn ends
at a reply it cannot decode, as BFCL's loop ends it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from .bfcl_check import openai_tools
from .bfcl_data import BfclCase
from .bfcl_multi import ADDED_FUNCTIONS, Conversed
from .bfcl_state import MAX_STEPS, Call, World

__all__ = ["EngineAlone", "Wire"]

#: An engine's own call as BFCL reads it: the name, the arguments' JSON text (as sent: an
#: engine may send anything there).
Wire = tuple[str, Any]


class EngineAlone:
    """An engine's Chat Completions URL, asked as BFCL asks it."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        options: Mapping[str, Any] | None = None,
        timeout: float = 120.0,
    ) -> None:
        from ..backends.http import new_client

        self._client = new_client(timeout)
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._model = model
        self._timeout = timeout
        self._extra = {
            k: v for k, v in (options or {}).items() if k in ("temperature", "max_tokens")
        }

    async def _message(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._model, "messages": messages, **self._extra}
        if tools:  # (BFCL sends no tools field when a case has none)
            body["tools"] = tools
        answer = await asyncio.wait_for(
            self._client.post(self._url, json=body, headers=self._headers), self._timeout
        )
        if answer.status_code != 200:
            raise ValueError(f"the engine answered {answer.status_code}: {answer.text[:160]}")
        message = answer.json()["choices"][0]["message"]
        if not isinstance(message, dict):
            raise ValueError("the engine's message is not an object")
        return message

    async def __call__(self, case: BfclCase) -> list[Wire]:
        """A single-turn case's calls, the arguments as sent."""
        message = await self._message(case.question[0], case.tools)
        return [
            (c["function"]["name"], c["function"].get("arguments"))
            for c in message.get("tool_calls") or ()
        ]

    async def converse(self, case: BfclCase) -> Conversed:
        """A multi-turn case as BFCL's loop runs an OpenAI function-calling model: each
        reply's calls run on the world and answered with ``tool`` messages, until a reply
        has none, or one BFCL cannot decode; past BFCL's step limit the conversation ends."""
        assert case.multi is not None
        out = Conversed()
        world = World(case.multi)
        functions = list(case.functions)
        messages: list[dict[str, Any]] = []
        for index in range(len(case.question)):
            if index in case.multi.held_out:
                functions += case.multi.held_out[index]
                messages.append({"role": "user", "content": ADDED_FUNCTIONS})
            else:
                messages.extend(case.question[index])
            tools = openai_tools(functions)
            steps: list[list[Call]] = []
            try:
                while True:
                    message = await self._message(messages, tools)
                    messages.append(_assistant(message))
                    calls = _decoded(message)
                    if not calls:
                        break
                    steps.append(calls)
                    results = await asyncio.to_thread(world.run, calls)
                    for own, result in zip(message["tool_calls"], results, strict=True):
                        messages.append(
                            {"role": "tool", "content": result, "tool_call_id": own.get("id")}
                        )
                    if len(steps) > MAX_STEPS:  # BFCL forces the conversation to quit
                        break
            except (ValueError, KeyError, TypeError, OSError, asyncio.TimeoutError) as exc:
                # as BFCL fails a case whose inference raised
                out.failed = str(exc)[:200] or type(exc).__name__
                return out
            out.turns.append(steps)
            if len(steps) > MAX_STEPS:
                break
        return out


def _assistant(message: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's message as BFCL keeps it in the history."""
    kept: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        kept["tool_calls"] = message["tool_calls"]
    return kept


def _decoded(message: Mapping[str, Any]) -> list[Call]:
    """The reply's calls as BFCL's ``decode_execute`` takes them: none when any arguments
    are not a JSON object (the decode fails, and the turn ends)."""
    calls: list[Call] = []
    for own in message.get("tool_calls") or ():
        function = own.get("function") or {}
        arguments = function.get("arguments")
        try:  # (BFCL takes arguments sent as an object as they are)
            if not isinstance(arguments, dict):
                arguments = json.loads(arguments or "")
        except (ValueError, TypeError, RecursionError):
            return []
        if not isinstance(arguments, dict):
            return []
        calls.append((str(function.get("name")), (), arguments))
    return calls
