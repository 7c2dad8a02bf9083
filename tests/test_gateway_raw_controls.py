"""A call an upstream's model writes as text, with raw line breaks, carriage returns or
tabs inside its JSON strings, is read by the gateway as ``toolwire parse`` reads it: one
tolerance, decided once (:func:`toolwire.formats.jsoncall.read_call_json`), named in a
``recovered-raw-controls`` notice, and off under ``strict`` (the text stays text).

Each variant is written as the content of a raw upstream on 127.0.0.1
(:mod:`tests.upstream_fake`), streamed in small pieces or sent whole as one JSON document,
and asked for through the gateway streamed and not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from toolwire.backends import OpenAIBackend
from toolwire.formats.words import Words
from toolwire.server import create_app
from toolwire.testing import ServedApp

from .upstream_fake import CONNECT, DONE, RawUpstream, ask, chunk, chunked, respond, streamed

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "run_code",
            "description": "Runs a program.",
            "parameters": {
                "type": "object",
                "properties": {
                    "code": {"type": "string"},
                    "col\tname": {"type": "string"},
                    "options": {
                        "type": "object",
                        "properties": {"source": {"type": "string"}},
                    },
                },
            },
        },
    }
]
ASK = {"model": "m", "messages": [{"role": "user", "content": "Run it."}], "tools": TOOLS}

_CALL = '{"name": "run_code", "arguments": {"code": "print(1)\nprint(2)"}}'
#: name: (the content the model writes, the arguments of each call it makes)
VARIANTS: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "newline": (_CALL, [{"code": "print(1)\nprint(2)"}]),
    "tab": (
        '{"name": "run_code", "arguments": {"code": "if x:\tpass"}}',
        [{"code": "if x:\tpass"}],
    ),
    "carriage-return": (
        '{"name": "run_code", "arguments": {"code": "a\r\nb"}}',
        [{"code": "a\r\nb"}],
    ),
    "in-a-key": (
        '{"name": "run_code", "arguments": {"col\tname": "x"}}',
        [{"col\tname": "x"}],
    ),
    "nested": (
        '{"name": "run_code", "arguments": {"options": {"source": "def f():\n\treturn 1"}}}',
        [{"options": {"source": "def f():\n\treturn 1"}}],
    ),
    "in-a-fence": ("```json\n" + _CALL + "\n```", [{"code": "print(1)\nprint(2)"}]),
    "in-tags": ("<tool_call>\n" + _CALL + "\n</tool_call>", [{"code": "print(1)\nprint(2)"}]),
    "json-lines": (
        _CALL + "\n" + '{"name": "run_code", "arguments": {"code": "x\ty"}}',
        [{"code": "print(1)\nprint(2)"}, {"code": "x\ty"}],
    ),
    "after-prose": ("I will run it.\n" + _CALL, [{"code": "print(1)\nprint(2)"}]),
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[RawUpstream]:
    server = RawUpstream()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _fresh(upstream: RawUpstream) -> None:
    upstream.reset()


@pytest.fixture(scope="module")
def gateway(upstream: RawUpstream) -> Iterator[str]:
    backend = OpenAIBackend("m", base_url=upstream.base_url, timeout=30, connect_timeout=CONNECT)
    with ServedApp(create_app(backend)) as served:
        yield served.url


def _play(upstream: RawUpstream, text: str, whole: bool) -> None:
    if whole:  # one JSON document where a stream was asked for
        body = {
            "id": "x",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
        }
        upstream.play(respond(200, json.dumps(body).encode()))
        return
    pieces = [chunk({"content": text[i : i + 4]}) for i in range(0, len(text), 4)]
    upstream.play(chunked(*pieces, chunk({}, "stop"), DONE))


def _reply(gateway: str, stream: bool, body: dict[str, Any]) -> tuple[list[Any], str, list[str]]:
    """The calls (name, arguments), the text and the notice codes a client got."""
    r = ask(gateway, stream=stream, body=body)
    assert r.status_code == 200, r.text
    if stream:
        events = streamed(r)
        calls: dict[int, dict[str, str]] = {}
        text = ""
        notices: list[str] = []
        for e in events[:-1]:
            notices += [n["code"] for n in (e.get("toolwire") or {}).get("notices", [])]
            for choice in e["choices"]:
                text += choice["delta"].get("content") or ""
                for c in choice["delta"].get("tool_calls") or []:
                    got = calls.setdefault(c["index"], {"name": "", "arguments": ""})
                    got["name"] += c.get("function", {}).get("name") or ""
                    got["arguments"] += c.get("function", {}).get("arguments") or ""
        made = [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())]
        return made, text, notices
    message = r.json()["choices"][0]["message"]
    made = [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]
    codes = [n["code"] for n in r.json()["toolwire"]["notices"]]
    return made, message.get("content") or "", codes


@pytest.mark.parametrize("whole", [False, True], ids=["upstream-streamed", "upstream-whole"])
@pytest.mark.parametrize("stream", [False, True], ids=["client-whole", "client-streamed"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_raw_controls_in_a_call_written_as_text_are_read_and_named(
    upstream: RawUpstream, gateway: str, variant: str, stream: bool, whole: bool
) -> None:
    text, arguments = VARIANTS[variant]
    _play(upstream, text, whole)
    calls, content, notices = _reply(gateway, stream, ASK)
    assert calls == [("run_code", args) for args in arguments]
    assert "recovered-raw-controls" in notices
    assert "run_code" not in content
    # as `toolwire parse --format words` reads the same text: the same calls, named alike
    parsed = Words().parse(text, TOOLS)
    assert [(c.name, c.arguments) for c in parsed.calls] == calls
    assert any("raw line breaks or tabs" in n for n in parsed.notices)


@pytest.mark.parametrize("variant", ["newline", "in-a-fence", "in-tags"])
def test_strict_reads_no_call_from_raw_controls(
    upstream: RawUpstream, gateway: str, variant: str
) -> None:
    """strict: no tolerance, so no call; the model's text comes back as it wrote it."""
    text, _ = VARIANTS[variant]
    _play(upstream, text, whole=False)
    calls, content, notices = _reply(gateway, False, {**ASK, "toolwire": {"strict": True}})
    assert calls == [] and content == text
    assert "recovered-raw-controls" not in notices
