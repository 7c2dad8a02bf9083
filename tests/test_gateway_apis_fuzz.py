"""Fuzzed Responses and Messages requests: whatever the body, the gateway answers with a
200 or a 4xx in that API's error shape — never a 500, never a traceback.

Bounded and seeded (``derandomize``), so it runs the same every time. The engine behind is a
small one that answers every request in words: the validator is what is fuzzed here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from toolwire.events import Done, Event, TextDelta
from toolwire.pipeline import Request
from toolwire.server import create_app


class _Words:
    """An engine that says one word, and counts what it was asked."""

    name = "words"

    def __init__(self) -> None:
        self.asked: list[Request] = []

    async def stream(self, request: Request) -> AsyncGenerator[Event, None]:
        self.asked.append(request)
        yield TextDelta("ok")
        yield Done("stop")


ENGINE = _Words()
CLIENT = TestClient(create_app(ENGINE), raise_server_exceptions=False)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["user", "assistant", "system", "tool", "function", "text", "auto", "any"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "role",
                    "content",
                    "name",
                    "text",
                    "id",
                    "input",
                    "call_id",
                    "arguments",
                    "output",
                    "tool_use_id",
                    "is_error",
                    "parameters",
                    "input_schema",
                    "function",
                    "x",
                ]
            ),
            inner,
            max_size=5,
        ),
    ),
    max_leaves=12,
)

RESPONSES_FIELDS = [
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_output_tokens",
    "temperature",
    "stream",
    "store",
    "previous_response_id",
    "toolwire",
]
MESSAGES_FIELDS = [
    "model",
    "messages",
    "system",
    "max_tokens",
    "temperature",
    "tools",
    "tool_choice",
    "thinking",
    "stream",
    "stop_sequences",
    "toolwire",
    "metadata",
]


def _bodies(fields: list[str]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.dictionaries(st.sampled_from(fields), values, max_size=6),
        values,
    )


def _answered(path: str, body: Any) -> tuple[int, Any]:
    r = CLIENT.post(path, content=json.dumps(body).encode())
    assert r.status_code == 200 or 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert "Traceback" not in r.text
    return r.status_code, r


@settings(
    max_examples=250,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(_bodies(RESPONSES_FIELDS))
def test_responses_requests_get_a_200_or_a_4xx_in_openai_shape(body: Any) -> None:
    status, r = _answered("/v1/responses", body)
    if status != 200:
        error = r.json()["error"]
        assert isinstance(error["message"], str) and error["type"]
    elif r.headers["content-type"].startswith("application/json"):
        assert r.json()["object"] == "response"
    else:
        assert "event: response.completed" in r.text


@settings(
    max_examples=250,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(_bodies(MESSAGES_FIELDS))
def test_messages_requests_get_a_200_or_a_4xx_in_anthropic_shape(body: Any) -> None:
    status, r = _answered("/v1/messages", body)
    if status != 200:
        error = r.json()
        assert error["type"] == "error" and isinstance(error["error"]["message"], str)
    elif r.headers["content-type"].startswith("application/json"):
        assert r.json()["type"] == "message"
    else:
        assert "event: message_stop" in r.text


def test_the_fuzz_reaches_the_engine_too() -> None:
    """Not every fuzzed body is refused: some are served (the fuzz is not all 4xx)."""
    before = len(ENGINE.asked)
    CLIENT.post("/v1/responses", json={"input": "hi"})
    CLIENT.post(
        "/v1/messages", json={"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    )
    assert len(ENGINE.asked) == before + 2
