"""``toolwire chat --conversation NAME`` and ``toolwire conversations …``, end to end.

The store is always in a temporary ``TOOLWIRE_HOME``. The kill tests run ``toolwire`` as a
real subprocess against a server that stops answering mid-turn, kill it with SIGKILL, and
read what the file holds. The conversation example of ``docs/cli.md`` (a ``shell`` block,
which the docs test leaves to this one so that it never touches a real home) runs on the
real default model.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from toolwire.cli import main
from toolwire.store import ConversationStore
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas, tool_call_deltas

ROOT = Path(__file__).parent.parent
HERMES_CALL = (
    '<tool_call>\n{"name": "calculator", "arguments": {"expression": "3*3"}}\n</tool_call>'
)
RECOVERED = "(read a call the model wrote as tagged)"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TOOLWIRE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TOOLWIRE_TOOL_FORMAT", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    return tmp_path / "home"


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def _chat(server: FakeOpenAIServer, *args: str) -> int:
    return main(["chat", *args, "--base-url", server.base_url, "--model", "m"])


def _show(capsys: pytest.CaptureFixture[str], name: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["conversations", "show", name, "--json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_a_resumed_conversation_sends_its_messages_and_keeps_its_format(
    server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.add_stream(
        tool_call_deltas([("c1", "calculator", json.dumps({"expression": "2+2"}))]),
        finish_reason="tool_calls",
    )
    server.add_stream(text_deltas("It is 4."))
    assert _chat(server, "--conversation", "c1", "--tool-format", "hermes", "--once", "A") == 0
    server.add_stream(text_deltas(HERMES_CALL))  # read in hermes, its own format: no recovery
    server.add_stream(text_deltas("9."))
    capsys.readouterr()
    assert _chat(server, "--conversation", "c1", "--once", "B") == 0
    out = capsys.readouterr().out
    assert out == '→ calculator({"expression": "3*3"})\n← 9\n9.\n'
    first_turn = server.requests[1]["messages"] + [{"role": "assistant", "content": "It is 4."}]
    assert server.requests[2]["messages"] == [*first_turn, {"role": "user", "content": "B"}]
    shown = _show(capsys, "c1")
    assert {"name", "messages", "settings", "session", "model", "created", "updated"} <= set(shown)
    assert shown["name"] == "c1" and shown["model"] == "m"
    assert shown["settings"]["tool_format"] == "hermes"
    assert [m["role"] for m in shown["messages"]] == [
        *("user", "assistant", "tool", "assistant"),
        *("user", "assistant", "tool", "assistant"),
    ]
    assert shown["messages"][6]["content"] == "9"
    # the same reply in a conversation made without a format is a recovered call (the
    # difference the kept format makes)
    server.add_stream(text_deltas(HERMES_CALL))
    server.add_stream(text_deltas("9."))
    assert _chat(server, "--conversation", "c2", "--once", "B") == 0
    assert RECOVERED in capsys.readouterr().out


def test_a_flag_on_resume_is_for_that_run_only_and_says_so(
    server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.add_stream(text_deltas("hi"))
    assert _chat(server, "--conversation", "c1", "--tool-format", "hermes", "--once", "A") == 0
    assert capsys.readouterr().err == ""
    server.add_stream(text_deltas(HERMES_CALL))
    server.add_stream(text_deltas("9."))
    assert _chat(server, "--conversation", "c1", "--tool-format", "llama3", "--once", "B") == 0
    run = capsys.readouterr()
    assert RECOVERED in run.out  # this run read the reply as llama3, not hermes
    assert "tool_format 'llama3' for this run; the conversation keeps 'hermes'" in run.err
    assert _show(capsys, "c1")["settings"]["tool_format"] == "hermes"


def test_read_only_and_max_tool_iters_are_kept(
    server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.add_stream(text_deltas("hi"))
    args = ["--conversation", "c1", "--read-only", "--max-tool-iters", "0", "--once", "A"]
    assert _chat(server, *args) == 0
    server.add_stream(text_deltas("again"))
    assert _chat(server, "--conversation", "c1", "--once", "B") == 0
    assert "tools" not in server.requests[1]  # max_tool_iters 0: the one turn has no tools
    settings = _show(capsys, "c1")["settings"]
    assert settings["read_only"] is True and settings["max_tool_iters"] == 0


def test_list_show_export_delete(
    server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conversations", "list"]) == 0
    assert "no conversations yet" in capsys.readouterr().out
    server.add_stream(text_deltas("Hello."))
    assert _chat(server, "--conversation", "greeting", "--once", "hi") == 0
    capsys.readouterr()
    assert main(["conversations", "list"]) == 0
    assert re.match(r"greeting\t2 messages\tm\t\d{4}-", capsys.readouterr().out)
    assert main(["conversations", "list", "--json"]) == 0
    assert [row["name"] for row in json.loads(capsys.readouterr().out)] == ["greeting"]
    assert main(["conversations", "show", "greeting"]) == 0
    text = capsys.readouterr().out
    assert "user: hi\nassistant: Hello." in text and "tool_format auto" in text
    assert main(["conversations", "export", "greeting"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["toolwire_conversation"] == 1 and len(exported["messages"]) == 2
    assert main(["conversations", "delete", "greeting"]) == 0
    assert capsys.readouterr().out == "deleted greeting\n"
    assert main(["conversations", "show", "greeting"]) == 2
    assert "no conversation named 'greeting'" in capsys.readouterr().err


def test_a_file_that_is_not_a_store_is_a_clear_error_and_left_alone(
    home: Path, server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    home.mkdir()
    notes = b"not a database" * 20
    (home / "toolwire.db").write_bytes(notes)
    assert main(["conversations", "list"]) == 2
    assert "is not a conversation store" in capsys.readouterr().err
    assert _chat(server, "--conversation", "c1", "--once", "A") == 2
    assert "is not a conversation store" in capsys.readouterr().err
    assert server.requests == []  # refused before anything was asked of the model
    assert (home / "toolwire.db").read_bytes() == notes


def test_what_a_model_taught_one_run_is_known_to_the_next(
    server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.add_error(400, {"message": "gemma:2b does not support tools"})
    server.add_error(400, {"message": "gemma:2b does not support tools"})  # the probe, alike
    server.add_stream(text_deltas("fine"))
    assert _chat(server, "--conversation", "c1", "--once", "A") == 0
    assert "tools" in server.requests[0] and "tools" in server.requests[1]  # asked, probed
    assert "tools" not in server.requests[2]
    server.add_stream(text_deltas("fine"))
    assert _chat(server, "--conversation", "c2", "--once", "B") == 0  # a new memory, same store
    assert "tools" not in server.requests[3]  # straight to words: no refusal to learn from
    assert "gets its tools in words" in capsys.readouterr().out


# -- killed mid-turn


class StallingServer:
    """Chat Completions over real HTTP that answers from a script and, at the end of it,
    starts a reply (``stall_with``) it never finishes; ``stalled`` is set then."""

    def __init__(self, script: list[list[dict[str, Any]]], stall_with: list[dict[str, Any]]):
        self.script = script
        self.stall_with = stall_with
        self.requests: list[dict[str, Any]] = []
        self.stalled = threading.Event()

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        n = len(self.requests) - 1
        return StreamingResponse(self._events(n), media_type="text/event-stream")

    async def _events(self, n: int) -> AsyncIterator[str]:
        deltas = self.script[n] if n < len(self.script) else self.stall_with
        calls = any("tool_calls" in d for d in deltas)
        for delta in deltas:
            yield _sse({"index": 0, "delta": delta, "finish_reason": None})
        if n >= len(self.script):
            self.stalled.set()
            await asyncio.sleep(3600)
        yield _sse({"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"})
        yield "data: [DONE]\n\n"

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])


def _sse(choice: dict[str, Any]) -> str:
    chunk = {"id": "x", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
    return f"data: {json.dumps(chunk)}\n\n"


def _calc(cid: str, expression: str) -> list[dict[str, Any]]:
    return tool_call_deltas([(cid, "calculator", json.dumps({"expression": expression}))])


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TOOLWIRE_HOME": str(home)}


@pytest.mark.parametrize("stall", ["mid-answer", "mid-call"])
def test_a_chat_killed_mid_turn_leaves_every_completed_step_and_no_half_one(
    home: Path, stall: str
) -> None:
    script = [
        _calc("k1", "1+1"),  # turn 1: a call, then the answer
        text_deltas("It is 2."),
        text_deltas("Noted."),  # turn 2: an answer
        _calc("k2", "5*5"),  # turn 3: a call, then the request that stalls
    ]
    partial = (
        text_deltas("It is ")
        if stall == "mid-answer"
        else _calc("k3", "6*7")[:2]  # a call begun, its arguments cut off
    )
    fake = StallingServer(script, partial)
    with ServedApp(fake.app()) as served:
        chat = ["chat", "--conversation", "c1", "--base-url", served.url + "/v1", "--model", "m"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolwire", *chat],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(home),
        )
        assert proc.stdin is not None
        proc.stdin.write(b"one\ntwo\nthree\n")
        proc.stdin.flush()
        assert fake.stalled.wait(60), proc.stderr.read() if proc.stderr else ""
        time.sleep(0.2)  # the partial reply reaches the client
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        proc.stdin.close()
    assert proc.returncode == -signal.SIGKILL
    messages = ConversationStore(home / "toolwire.db").get("c1").messages
    roles = [m["role"] for m in messages]
    assert roles == [
        *("user", "assistant", "tool", "assistant"),  # turn 1, whole
        *("user", "assistant"),  # turn 2, whole
        *("user", "assistant", "tool"),  # turn 3's step, kept before the request that stalled
    ]
    assert messages[2]["content"] == "2" and messages[8]["content"] == "25"
    assert [m["content"] for m in messages if m["role"] == "user"] == ["one", "two", "three"]
    # what the stalled request carried is exactly what the file holds
    assert fake.requests[-1]["messages"] == messages


_SLOW_TOOL = """
import sys, time
from pathlib import Path
from toolwire import OpenAIBackend, Toolbox, run_loop_sync
from toolwire.store import ConversationStore
base_url, started = sys.argv[1], Path(sys.argv[2])
box = Toolbox()

@box.tool(read_only=True)
def fast() -> str:
    "Quick."
    return "quick"

@box.tool(read_only=True)
def slow() -> str:
    "Takes its time."
    started.touch()
    time.sleep(3600)
    return "late"

conversation = ConversationStore().open("c1")
for prompt in ("first", "second"):
    conversation.add_user(prompt)
    for _ in run_loop_sync(OpenAIBackend("m", base_url=base_url), conversation, box):
        pass
"""


def test_a_process_killed_while_its_tool_runs_never_stores_the_call_without_its_result(
    home: Path, tmp_path: Path
) -> None:
    script = [
        tool_call_deltas([("a", "fast", "{}")]),
        text_deltas("done"),
        tool_call_deltas([("b", "fast", "{}"), ("c", "slow", "{}")]),  # c never returns
    ]
    fake = StallingServer(script, [])
    started = tmp_path / "started"
    with ServedApp(fake.app()) as served:
        proc = subprocess.Popen(
            [sys.executable, "-c", _SLOW_TOOL, served.url + "/v1", str(started)],
            env=_env(home),
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while not started.exists():
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    messages = ConversationStore(home / "toolwire.db").get("c1").messages
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert not any(m.get("tool_calls") and m["tool_calls"][0]["id"] == "b" for m in messages)


# -- the example in docs/cli.md, on the real default model


def _docs_lines() -> list[str]:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```shell\n(.*?)^```$", page, re.M | re.S)
    (block,) = [b for b in blocks if "--conversation" in b]
    return [ln for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]


def test_the_docs_conversation_example_runs_on_the_real_model(qwen_gguf: Path, home: Path) -> None:
    lines = _docs_lines()
    assert any("conversations show" in ln for ln in lines)
    outputs = []
    for line in lines:
        argv = shlex.split(line, comments=True)
        assert argv[0] == "toolwire"
        done = subprocess.run(
            [sys.executable, "-m", "toolwire", *argv[1:]],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            env={**_env(home), "PYTHONIOENCODING": "utf-8"},
        )
        assert done.returncode == 0, (line, done.stderr)
        outputs.append((line, done.stdout))
        if "conversations show" in line and "--json" in line:
            shown = json.loads(done.stdout)
            users = [m["content"] for m in shown["messages"] if m["role"] == "user"]
            assert len(users) == 2  # both chat lines went into one conversation
            assert shown["settings"]["tool_format"] == "hermes"
            results = [m["content"] for m in shown["messages"] if m["role"] == "tool"]
            assert "391" in results  # the first turn's calculator call and its result
    assert not ConversationStore(home / "toolwire.db").summaries()  # the last line deletes it
