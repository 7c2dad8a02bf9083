"""``toolwire chat`` and its demo tools."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.chat import CalculatorError, calculate, chat
from toolwire.cli import main
from toolwire.testing import FakeOpenAIServer, text_deltas, tool_call_deltas


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2+2", 4),
        ("12*(3+4)", 84),
        ("2**10", 1024),
        ("2^8", 256),
        ("7/2", 3.5),
        ("-7//2", -4),
        ("10 % 3", 1),
        ("1e3 + 0.5", 1000.5),
    ],
)
def test_calculator(expression: str, value: float) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('x')",
        "open('/etc/passwd')",
        "x + 1",
        "2**10**10",
        "1/0",
        "[1, 2]",
        "'a' * 3",
        "(lambda: 1)()",
        "9" * 300,
        "10.0**400",
        "(-1)**0.5",
    ],
)
def test_calculator_refuses_what_is_not_plain_arithmetic(expression: str) -> None:
    with pytest.raises(CalculatorError):
        calculate(expression)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def test_chat_once_prints_the_call_the_result_and_the_answer(
    server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server.add_stream(
        tool_call_deltas([("c1", "calculator", json.dumps({"expression": "12*(3+4)"}))]),
        finish_reason="tool_calls",
    )
    server.add_stream(text_deltas("It is 84."))
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code = main(
        [
            "chat",
            "--once",
            "What is 12*(3+4)?",
            "--base-url",
            server.base_url,
            "--model",
            "m",
            "--temperature",
            "0",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert out == '→ calculator({"expression": "12*(3+4)"})\n← 84\nIt is 84.\n'
    offered = [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert offered == ["calculator", "current_time", "word_count"]
    assert server.requests[0]["temperature"] == 0


def test_chat_reads_prompts_until_the_input_ends(server: FakeOpenAIServer) -> None:
    server.add_stream(text_deltas("Hello!"))
    server.add_stream(text_deltas("Bye."))
    out = io.StringIO()
    from toolwire.backends import OpenAIBackend

    chat(OpenAIBackend("m", base_url=server.base_url), stdin=io.StringIO("hi\n\nbye\n"), out=out)
    assert out.getvalue() == "> Hello!\n> > Bye.\n> "  # a blank line asks again
    assert [m["content"] for m in server.requests[1]["messages"]] == ["hi", "Hello!", "bye"]


def test_chat_once_on_the_local_default_model(
    llama_backend: LlamaCppBackend, qwen_gguf: Path
) -> None:
    out = io.StringIO()
    code = chat(
        llama_backend,
        once="What is 2+3? Use the calculator.",
        out=out,
        settings={"max_tool_iters": 1},
        request_options={"max_tokens": 48},
    )
    assert code == 0 and out.getvalue().strip()  # the pipeline ran to an answer
