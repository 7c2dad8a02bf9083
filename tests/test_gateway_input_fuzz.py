"""A bounded, seeded fuzz campaign for the gateway's request check.

Arbitrary JSON-ish bodies — random values, request-shaped objects with random fields, valid
requests with one value swapped for a random one, raw text with NaN, surrogate escapes and
repeated keys spliced in, and arbitrary bytes — give only the documented outcome:
:func:`validate_chat_request` returns the request or raises :class:`RequestError` (a 400 with
a message and a field that can be sent as UTF-8); through the app, the client gets a 200 or a
400, never anything else, and the backend is called only for a request that was accepted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.server import RequestError, create_app, validate_chat_request
from toolwire.testing import ScriptedLlama

from .gateway_requests import BASE, CALL, RESULT, TOOL, USER, VALID, Recorder

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"
FUZZ = settings(
    derandomize=True,
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --------------------------------------------------------------------------- strategies

KEYS = [
    *BASE,
    *(key for _, sent in VALID for key in sent),
    "stream",
    "n",
    "toolwire",
    "functions",
    "audio",
    "response_format",
    "role",
    "content",
    "type",
    "function",
    "name",
    "parameters",
    "tool_calls",
    "tool_call_id",
    "arguments",
    "text",
    "image_url",
    "url",
]
SURROGATES = st.sampled_from(["\ud800", "\udfff", "a\udc80b"])
TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from([*sorted(set(KEYS)), "user", "assistant", "tool", "system", "auto", "none"]),
    SURROGATES,
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
)
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(sorted(set(KEYS))), TEXT), inner, max_size=5),
    ),
    max_leaves=30,
)


@st.composite
def request_shaped(draw: st.DrawFn) -> dict[str, Any]:
    """An object with the request's own field names, each holding something random or
    something right."""
    right = {
        "messages": [USER],
        "tools": [TOOL],
        "tool_choice": "auto",
        "stream": True,
        "parallel_tool_calls": False,
        "temperature": 0.5,
        "max_tokens": 8,
        "toolwire": {"strict": True},
        "n": 1,
    }
    out: dict[str, Any] = {"messages": draw(st.one_of(st.just([USER]), JSONISH))}
    for key in draw(st.lists(st.sampled_from(sorted(set(KEYS))), max_size=6)):
        out[key] = draw(st.one_of(st.just(right.get(key)), JSONISH))
    return out


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, inner in value.items():
            out += _paths(inner, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            out += _paths(inner, (*path, i))
    return out


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], tuple(rest), new)}
    copy = list(value)
    copy[head] = _replaced(value[head], tuple(rest), new)
    return copy


CONVERSATION = {**BASE, "messages": [USER, CALL, RESULT], "tool_choice": "auto"}


@st.composite
def one_value_swapped(draw: st.DrawFn) -> Any:
    """A valid request with one value (anywhere in it) replaced by a random one, or dropped."""
    start = draw(st.sampled_from([CONVERSATION, *(sent for _, sent in VALID)]))
    path = draw(st.sampled_from(_paths(start)))
    if path and isinstance(path[-1], str) and draw(st.booleans()):
        return _dropped(start, path)
    return _replaced(start, path, draw(JSONISH))


def _dropped(value: Any, path: tuple[Any, ...]) -> Any:
    head, *rest = path
    if not rest:
        return {k: v for k, v in value.items() if k != head}
    inner = _dropped(value[head], tuple(rest))
    if isinstance(value, dict):
        return {**value, head: inner}
    copy = list(value)
    copy[head] = inner
    return copy


SPLICES = st.sampled_from(
    [
        "NaN",
        "Infinity",
        "-Infinity",
        "1e999",
        '"\\ud800"',
        '"a\\udfffb"',
        '"\\ud83d\\ude00"',
        "9" * 5000,
        "[" * 70 + "]" * 70,
        "{",
        "}",
        ",",
        '"stream": true, "stream": false',
        "\ufeff",
        "\x00",
        "[" * 2000,
    ]
)


@st.composite
def raw_text(draw: st.DrawFn) -> bytes:
    """JSON text of a request with a token spliced in somewhere."""
    text = json.dumps(draw(st.one_of(one_value_swapped(), request_shaped())))
    at = draw(st.integers(0, len(text)))
    return (text[:at] + draw(SPLICES) + text[at:]).encode("utf-8", "surrogatepass")


def _encoded(value: Any) -> bytes:
    """JSON bytes of any value (a lone surrogate kept as its escape, NaN as NaN)."""
    return json.dumps(value).encode("ascii")


BODIES = st.one_of(
    JSONISH.map(_encoded),
    request_shaped().map(_encoded),
    one_value_swapped().map(_encoded),
    raw_text(),
    st.binary(max_size=64),
)

# --------------------------------------------------------------------------- properties


def _sendable(text: str | None) -> bool:
    if text is None:
        return True
    text.encode("utf-8")
    return True


@FUZZ
@given(BODIES)
def test_the_validator_returns_a_request_or_raises_request_error(sent: bytes) -> None:
    try:
        request = validate_chat_request(sent)
        stream, parallel = request.stream, request.parallel_calls
    except RequestError as exc:
        event("refused")
        assert exc.status == 400
        assert exc.message and _sendable(exc.message) and _sendable(exc.param)
        assert exc.param is None or exc.message.startswith(exc.param)
        return
    event("accepted")
    assert isinstance(stream, bool) and isinstance(parallel, bool)
    assert request.messages and all(isinstance(m, dict) for m in request.messages)
    json.dumps(list(request.messages)).encode("utf-8")  # what a backend sends on is JSON


RECORDER = Recorder()
RECORDED = TestClient(create_app(RECORDER), raise_server_exceptions=False)


@FUZZ
@given(BODIES)
def test_the_app_answers_200_or_400_and_calls_the_backend_only_when_it_accepts(
    sent: bytes,
) -> None:
    before = len(RECORDER.requests)
    r = RECORDED.post(
        "/v1/chat/completions", content=sent, headers={"content-type": "application/json"}
    )
    event(f"status {r.status_code}")
    assert r.status_code in (200, 400), r.text
    assert len(RECORDER.requests) == before + (r.status_code == 200)
    if r.status_code == 400:
        assert r.json()["error"]["type"] == "invalid_request_error"


# A real reply pipeline behind the app: the local backend rendering the conversation through
# a published template (Qwen 2.5's) with a scripted model, so that what the check lets through
# is rendered, parsed and answered as a real turn is. A template that cannot render what the
# check accepts (Qwen 2.5's adds content to a string, so a list of content parts fails in it)
# is an engine failure, answered as documented: a 502 in OpenAI's error shape, never a 500.
TEMPLATE = (FIXTURES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
PIPELINE = TestClient(
    create_app(LlamaCppBackend("scripted", llama=ScriptedLlama(TEMPLATE, "fine"))),
    raise_server_exceptions=False,
)


@settings(FUZZ, max_examples=150)
@given(st.one_of(request_shaped().map(_encoded), one_value_swapped().map(_encoded)))
def test_what_the_check_accepts_the_pipeline_answers(sent: bytes) -> None:
    r = PIPELINE.post(
        "/v1/chat/completions", content=sent, headers={"content-type": "application/json"}
    )
    event(f"status {r.status_code}")
    assert r.status_code in (200, 400, 502), r.text
    if r.status_code == 502:
        assert r.json()["error"]["type"] == "upstream_error"
        assert "TypeError" in r.json()["error"]["message"]  # the template, not the gateway
