"""A tool schema's patterns cannot hold the gateway: each is matched in linear time (RE2),
as ECMA-262 reads it, and one that cannot be matched so is not checked and said so.

With Python's backtracking ``re``, ``^(a+)+$`` against 26 ``a`` and a ``!`` took 8 seconds
and each more character doubled it; here 28 are checked through the gateway while
``/health`` answers. What keeps them quick is the engine, so that is what the tests check
(not a time, which a busy machine stretches): the hostile text is matched by RE2, and
Python's ``re`` is never given the pattern (:func:`engines`)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from toolwire.arguments import prepare_arguments
from toolwire.arguments.patterns import MAX_PATTERN, MAX_TEXT, Matcher, search
from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.errors import ArgumentsError
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ServedApp, tool_call_deltas

NESTED = "^(a+)+$"
HOSTILE = "a" * 28 + "!"
HONEST = r"^([a-z0-9]+\.)+[a-z]+$"  # a host name: an honest schema's pattern
HOSTILE_HOST = "a." * 40 + "a!"  # what a prompt injection could make a model write
#: The patterns a backtracking engine takes minutes (or for ever) to match against those.
BACKTRACKING = frozenset({NESTED, HONEST})


@pytest.fixture
def engines(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every text a schema's pattern is matched against, with the engine that matched it
    (the module of its compiled pattern: ``re2`` is linear in the text). Python's ``re`` is
    never to be given one of :data:`BACKTRACKING`: every one of its functions compiles
    through ``re._compile``, which fails the test at once rather than match for minutes."""
    searched: list[tuple[str, str]] = []
    search_ = Matcher.search

    def recorded(self: Matcher, text: str) -> bool:
        searched.append((type(self._compiled).__module__, text))
        return search_(self, text)

    compile_ = re._compile  # type: ignore[attr-defined]

    def guarded(pattern: Any, flags: Any) -> Any:
        assert pattern not in BACKTRACKING, f"Python's backtracking re was given {pattern!r}"
        return compile_(pattern, flags)

    monkeypatch.setattr(Matcher, "search", recorded)
    monkeypatch.setattr(re, "_compile", guarded)
    return searched


def _schema(pattern: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": pattern}},
        "required": ["s"],
    }


@pytest.mark.parametrize("pattern,text", [(NESTED, HOSTILE), (HONEST, HOSTILE_HOST)])
def test_a_backtracking_pattern_refuses_a_hostile_argument_at_once(
    pattern: str, text: str, engines: list[tuple[str, str]]
) -> None:
    with pytest.raises(ArgumentsError) as caught:
        prepare_arguments({"s": text}, _schema(pattern), name="t")
    assert ("re2", text) in engines, engines  # Python's re: minutes for these
    assert "s: expected text matching" in caught.value.explanation


def test_pattern_properties_and_closed_objects_use_the_bounded_matcher(
    engines: list[tuple[str, str]],
) -> None:
    schema = {
        "type": "object",
        "patternProperties": {NESTED: {"type": "integer"}},
        "additionalProperties": False,
    }
    with pytest.raises(ArgumentsError) as caught:
        prepare_arguments({HOSTILE: 1, "aaa": "x"}, schema, name="t", strict=True)
    assert ("re2", HOSTILE) in engines, engines
    assert "not a field this tool takes" in caught.value.explanation
    done = prepare_arguments({"aaaa": "3"}, schema, name="t")
    assert done.arguments == {"aaaa": 3}  # a field the pattern takes is typed by its schema


def test_unevaluated_properties_match_patterns_boundedly(
    engines: list[tuple[str, str]],
) -> None:
    schema = {
        "type": "object",
        "patternProperties": {NESTED: True},
        "unevaluatedProperties": False,
    }
    with pytest.raises(ArgumentsError):
        prepare_arguments({HOSTILE: 1}, schema, name="t", strict=True)
    assert engines and all(engine == "re2" for engine, _ in engines), engines
    assert ("re2", HOSTILE) in engines


@pytest.mark.parametrize(
    "pattern,text,found",
    [
        ("^[a-z]+$", "abc\n", False),  # ECMA's $ is the end: Python's re takes a last newline
        (r"\d", "\u0663", False),  # ECMA's \d is ASCII: Python's takes an Arabic-Indic 3
        (r"^\s$", "\u00a0", True),  # ECMA's \s is Unicode white space
        (r"\u00e9", "\u00e9", True),  # a \u escape (Python's re refuses none, RE2 all)
        (r"(?<year>\d{4})", "in 2024", True),  # ECMA's named group (Python's re refuses it)
        ("a.b", "a\rb", False),  # ECMA's . stops at every line terminator
        ("b", "abc", True),  # unanchored: searched, not matched
    ],
)
def test_patterns_read_as_ecma_262(pattern: str, text: str, found: bool) -> None:
    assert search(pattern, text) is found


def test_a_pattern_that_cannot_be_matched_in_linear_time_is_not_checked_and_named() -> None:
    from toolwire import events as ev
    from toolwire.messages import ToolCall
    from toolwire.pipeline.end import prepare_call

    schema = _schema(r"^(a+)\1$")  # a back-reference: no linear-time engine takes it
    end, notices = prepare_call(ev.CallEnd(0, ToolCall("c1", "t", {}, '{"s": "ab"}')), schema)
    assert end.invalid is None and json.loads(end.arguments or "") == {"s": "ab"}
    (notice,) = [n for n in notices if n.code == "pattern-not-checked"]
    assert "t (c1)" in notice.message and "properties.s.pattern" in notice.message
    long = _schema("a" * (MAX_PATTERN + 1))
    assert prepare_arguments({"s": "b"}, long).unchecked == ("properties.s.pattern",)


def test_a_field_a_pattern_not_checked_may_take_is_kept_as_sent() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "patternProperties": {r"^(?=tag_)": {"type": "string"}},  # a look-ahead
        "additionalProperties": False,
    }
    done = prepare_arguments({"x": "1", "tag_a": "v"}, schema)
    assert done.arguments == {"x": 1, "tag_a": "v"} and done.unknown == ()
    assert done.unchecked == ('patternProperties["^(?=tag_)"]',)


def test_text_longer_than_the_bound_does_not_fit_a_pattern() -> None:
    with pytest.raises(ArgumentsError) as caught:
        prepare_arguments({"s": "a" * (MAX_TEXT + 1)}, _schema("^a+$"))
    assert "expected text matching" in caught.value.explanation


# -- through the gateway, over real HTTP


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def gateway(upstream: FakeOpenAIServer) -> Iterator[str]:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield served.url


@pytest.mark.parametrize("pattern,text", [(NESTED, HOSTILE), (HONEST, HOSTILE_HOST)])
def test_a_hostile_argument_is_checked_in_milliseconds_and_health_answers_meanwhile(
    upstream: FakeOpenAIServer,
    gateway: str,
    pattern: str,
    text: str,
    engines: list[tuple[str, str]],
) -> None:
    arguments = json.dumps({"s": text})
    upstream.add_stream(tool_call_deltas([("c1", "t", arguments)]), finish_reason="tool_calls")
    body = {
        "model": "gw",
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"type": "function", "function": {"name": "t", "parameters": _schema(pattern)}}],
    }
    replies: list[httpx.Response] = []

    def ask() -> None:
        replies.append(httpx.post(gateway + "/v1/chat/completions", json=body, timeout=30))

    asking = threading.Thread(target=ask)
    asking.start()
    health: list[float] = []
    while asking.is_alive() or not health:
        start = time.perf_counter()
        assert httpx.get(gateway + "/health", timeout=30).status_code == 200
        health.append(time.perf_counter() - start)
    asking.join()
    # the gateway matched the model's text with RE2 (with Python's re: minutes, /health
    # waiting); /health's latency is the loop's, a generous bound for a loaded machine
    assert ("re2", text) in engines, engines
    assert max(health) < 1.0
    (reply,) = replies
    assert reply.status_code == 200
    body_out = reply.json()
    (call,) = body_out["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"s": text}  # as the model wrote it
    codes = [n["code"] for n in body_out["toolwire"]["notices"]]
    assert "arguments-invalid" in codes
