"""Lessons a client cannot teach: a refusal read from a provider's free text heals the
request that met it and nothing else; a lesson for the model comes only from a machine
probe of the gateway's own (never from a machine error code, which describes the request),
carries its source and end, and keeps them in
the store. Over real HTTP, against upstreams in tests/lessons_upstream.py."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from toolwire import events as ev
from toolwire.backends import OpenAIBackend
from toolwire.errors import BackendError, UsageError
from toolwire.pipeline import ModelMemory, Request
from toolwire.pipeline.lessons import PROBE_MESSAGE, probe_request
from toolwire.pipeline.memory import ProbeGate
from toolwire.schemas.refusals import Refusal, read_refusal, refuses_field
from toolwire.store import ConversationStore
from toolwire.testing import ServedApp

from .lessons_upstream import Coded, NoTools, Quoting

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


class Clock:
    """A clock a test moves."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _tool(description: str) -> dict[str, Any]:
    return {**WEATHER, "function": {**WEATHER["function"], "description": description}}


def _run(backend: Any, tools: list[dict[str, Any]]) -> list[ev.Event]:
    async def collect() -> list[ev.Event]:
        request = Request([{"role": "user", "content": "weather?"}], tools)
        return [e async for e in backend.stream(request)]

    return asyncio.run(collect())


def _notices(events: list[ev.Event]) -> dict[str, str]:
    return {e.code: e.message for e in events if isinstance(e, ev.Notice)}


# -- reading a refusal


def test_free_text_is_never_sure_and_a_machine_code_is() -> None:
    quoted = json.dumps({"error": {"message": "'x does not support tools'", "code": None}})
    assert read_refusal(BackendError("r", status=400, body=quoted)) == Refusal("tools")
    coded = json.dumps(
        {"error": {"code": "invalid_function_parameters", "param": "tools[0].function.parameters"}}
    )
    assert read_refusal(BackendError("r", status=400, body=coded)) == Refusal(
        "schema", sure=True, code="invalid_function_parameters"
    )
    no_tools = json.dumps({"error": {"code": "unsupported_parameter", "param": "tools"}})
    assert read_refusal(BackendError("r", status=400, body=no_tools)) == Refusal(
        "tools", sure=True, code="unsupported_parameter"
    )
    # a code under another status, or a code naming another field, is not a sure refusal
    assert read_refusal(BackendError("r", status=503, body=coded)) is None
    other = json.dumps({"error": {"code": "unsupported_parameter", "param": "max_tokens"}})
    assert read_refusal(BackendError("r", status=400, body=other)) is None
    # the field refusal: only its machine fields, not a message naming it
    said = json.dumps({"error": {"message": "Unrecognized argument: stream_options"}})
    assert not refuses_field(BackendError("r", status=400, body=said), "stream_options")
    loc = json.dumps({"detail": [{"type": "extra_forbidden", "loc": ["body", "stream_options"]}]})
    assert refuses_field(BackendError("r", status=422, body=loc), "stream_options")


# -- through a backend, over real HTTP


def test_a_refusal_quoting_the_clients_tool_heals_that_request_and_teaches_nothing() -> None:
    upstream = Quoting()
    memory = ModelMemory()
    with ServedApp(upstream.app) as served:
        backend = OpenAIBackend("m", base_url=served.url + "/v1", memory=memory)
        first = _run(backend, [_tool("Forbidden: this model does not support tools, they say")])
        told = _notices(first)["healed-tools"]
        assert "for this request only" in told and "probe the gateway sent was accepted" in told
        # the probe: toolwire's own fixed tool and message, one token, nothing of the client's
        (probe,) = upstream.probes
        assert probe["max_tokens"] == 1
        assert probe["messages"] == [{"role": "user", "content": PROBE_MESSAGE}]
        assert "Forbidden" not in json.dumps(probe) and "weather" not in json.dumps(probe)
        # the next client gets native tools, its schema as it sent it
        second = _run(backend, [WEATHER])
    assert not memory.recall(backend.endpoint, "m").words
    assert "tools-in-words" not in _notices(second)
    last = upstream.clients[-1]
    assert last["tools"][0]["function"]["parameters"] == WEATHER["function"]["parameters"]


def test_a_machine_code_teaches_the_model_only_through_the_probe() -> None:
    """A code describes the request: the lesson comes from the probe refused alike."""
    upstream = Coded()
    clock = Clock()
    memory = ModelMemory(clock=clock, ttl=600, probe_every=60)
    with ServedApp(upstream.app) as served:
        backend = OpenAIBackend("m", base_url=served.url + "/v1", memory=memory)
        first = _run(backend, [WEATHER])
        told = _notices(first)["healed-schema"]
        assert "learned from a probe the gateway sent" in told and "error code" not in told
        (probe,) = upstream.probes  # the gateway's own keyword tool, refused alike
        assert "anyOf" in json.dumps(probe["tools"]) and "weather" not in json.dumps(probe)
        lesson = memory.recall(backend.endpoint, "m")
        assert (lesson.dialect, lesson.source, lesson.until) == ("strict", "probe", clock.now + 600)
        second = _run(backend, [WEATHER])
        told = _notices(second)["schema-dialect"]
        assert "learned from a probe the gateway sent" in told and "until" in told
        assert "anyOf" not in json.dumps(upstream.bodies[-1]["tools"])
        assert len(upstream.probes) == 1
        # the lesson ends: the next request is sent as the client wrote it again
        clock.now += 601
        assert memory.recall(backend.endpoint, "m").dialect is None
        third = _run(backend, [WEATHER])
    assert "schema-dialect" not in _notices(third) and "healed-schema" in _notices(third)
    assert "anyOf" in json.dumps(upstream.clients[-2]["tools"])  # as sent, then healed


def test_a_probe_refused_the_same_way_teaches_the_model_and_the_notice_names_it() -> None:
    upstream = NoTools()
    memory = ModelMemory()
    with ServedApp(upstream.app) as served:
        backend = OpenAIBackend("m", base_url=served.url + "/v1", memory=memory)
        first = _run(backend, [WEATHER])
        assert "learned from a probe the gateway sent" in _notices(first)["healed-tools"]
        assert len(upstream.probes) == 1
        lesson = memory.recall(backend.endpoint, "m")
        assert lesson.words and lesson.source == "probe" and lesson.until is not None
        second = _run(backend, [WEATHER])
    told = _notices(second)["tools-in-words"]
    assert "learned from a probe the gateway sent, until" in told
    assert "tools" not in upstream.bodies[-1]
    assert len(upstream.probes) == 1  # a lesson held: nothing refused, nothing probed


def test_probes_of_a_model_are_bounded() -> None:
    """A second refusal in words soon after a probe heals its own request, unprobed."""
    upstream = Quoting()
    clock = Clock()
    memory = ModelMemory(clock=clock, probe_every=60)
    with ServedApp(upstream.app) as served:
        backend = OpenAIBackend("m", base_url=served.url + "/v1", memory=memory)
        refused = [_tool("forbidden: does not support tools")]
        _run(backend, refused)
        again = _run(backend, refused)
        assert "probed lately" in _notices(again)["healed-tools"]
        assert len(upstream.probes) == 1
        clock.now += 61
        _run(backend, refused)
        assert len(upstream.probes) == 2
    assert not memory.recall(backend.endpoint, "m").words


def test_one_probe_in_flight_per_model() -> None:
    clock = Clock()
    gate = ProbeGate(every=0, clock=clock)
    assert gate.take(("e", "m"))
    assert not gate.take(("e", "m"))  # in flight
    assert gate.take(("e", "n"))  # another model is its own
    gate.give_back(("e", "m"))
    assert gate.take(("e", "m"))


def test_the_probe_is_fixed() -> None:
    schema = probe_request("schema")
    tools = probe_request("tools")
    assert schema.max_tokens == tools.max_tokens == 1
    text = json.dumps(schema.tools)
    for keyword in ("anyOf", "additionalProperties", "$ref", "format", "pattern"):
        assert keyword in text
    assert "anyOf" not in json.dumps(tools.tools)
    assert probe_request("tools") == tools  # the same every time


# -- the lesson's source and end


def test_a_given_lesson_lasts_and_a_learned_one_ends() -> None:
    clock = Clock()
    memory = ModelMemory(clock=clock, ttl=10)
    memory.learn("e", "given", words=True)
    memory.learn("e", "probed", words=True, source="probe")
    assert memory.recall("e", "given").source == "given"
    assert memory.recall("e", "given").until is None
    clock.now += 11
    assert memory.recall("e", "given").words
    assert not memory.recall("e", "probed").words
    with pytest.raises(UsageError):
        memory.learn("e", "m", words=True, source="rumour")


def test_a_persisted_lesson_keeps_its_source_and_end_across_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "toolwire.db"
    clock = Clock()
    memory = ModelMemory(store=ConversationStore(path), clock=clock, ttl=100)
    memory.learn("e", "n", words=True, source="probe")
    memory.learn("e", "g", words=True)
    later = ModelMemory(store=ConversationStore(path), clock=clock)
    probed = later.recall("e", "n")
    assert (probed.source, probed.until) == ("probe", clock.now + 100)
    assert later.recall("e", "g").until is None
    clock.now += 101  # the learned ones have ended: not loaded at all
    ended = ModelMemory(store=ConversationStore(path), clock=clock)
    assert len(ended) == 1 and ended.recall("e", "g").words


def test_lessons_of_an_older_store_are_dropped_by_the_migration(tmp_path: Path) -> None:
    """A store at version 1 kept lessons read from free text: they are not trusted."""
    path = tmp_path / "toolwire.db"
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE lessons (endpoint TEXT NOT NULL, model TEXT NOT NULL, dialect TEXT, "
        "words INTEGER NOT NULL, used REAL NOT NULL, PRIMARY KEY (endpoint, model))"
    )
    con.execute(
        "CREATE TABLE conversations (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
        " uid TEXT NOT NULL, model TEXT, settings TEXT NOT NULL, session TEXT NOT NULL,"
        " created TEXT NOT NULL, updated TEXT NOT NULL)"
    )
    con.execute(
        "CREATE TABLE messages (conversation INTEGER NOT NULL, seq INTEGER NOT NULL,"
        " body TEXT NOT NULL, PRIMARY KEY (conversation, seq))"
    )
    con.execute("INSERT INTO lessons VALUES ('e', 'm', NULL, 1, 1.0)")
    con.execute("PRAGMA user_version = 1")
    con.commit()
    con.close()
    store = ConversationStore(path)
    assert store.load_lessons() == []
    ModelMemory(store=store).learn("e", "m", words=True, source="probe")
    assert store.load_lessons()[0]["source"] == "probe"


def test_a_memory_file_keeps_sources_and_one_without_is_given(tmp_path: Path) -> None:
    memory = ModelMemory()  # the real clock: the file is read by another memory
    memory.learn("e", "m", words=True, source="probe")
    path = tmp_path / "memory.json"
    memory.save(path)
    assert ModelMemory.load(path).recall("e", "m").source == "probe"
    old = ModelMemory.from_json([{"endpoint": "e", "model": "m", "words": True}])
    assert old.recall("e", "m").source == "given" and old.recall("e", "m").until is None
    with pytest.raises(UsageError):
        ModelMemory.from_json([{"endpoint": "e", "model": "m", "source": "rumour"}])


def test_a_lesson_an_older_version_learned_from_an_error_code_is_not_loaded() -> None:
    """A code answered a client's request: what it taught is not trusted, nor taught now."""
    old = ModelMemory.from_json(
        [
            {
                "endpoint": "e",
                "model": "m",
                "dialect": "strict",
                "source": "code",
                "until": 4e9,
                "code": "invalid_function_parameters",
            },
            {"endpoint": "e", "model": "n", "words": True, "source": "probe", "until": 4e9},
        ]
    )
    assert old.recall("e", "m").dialect is None and old.recall("e", "n").words
    with pytest.raises(UsageError):
        old.learn("e", "m", dialect="strict", source="code")
