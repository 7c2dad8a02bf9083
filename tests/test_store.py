"""The conversation store: what it keeps, when, and how it refuses a file it cannot use.

Every test uses a store in a temporary directory (``TOOLWIRE_HOME`` points there), never the
real home. The concurrency test runs two real processes against one file.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from toolwire import (
    Conversation,
    ModelMemory,
    OpenAIBackend,
    StoreError,
    TextDelta,
    Toolbox,
    ToolResult,
    UsageError,
    run_loop_sync,
)
from toolwire.store import SCHEMA_VERSION, ConversationStore, StoredConversation, default_path
from toolwire.store.db import MIGRATIONS
from toolwire.testing import FakeOpenAIServer, text_deltas, tool_call_deltas

ROOT = Path(__file__).parent.parent


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TOOLWIRE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TOOLWIRE_TOOL_FORMAT", raising=False)
    return tmp_path / "home"


def _call(cid: str, name: str = "f") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


def _step(conversation: Conversation, tag: str) -> None:
    """A user message, a call, and its result: one whole step."""
    conversation.add_user(tag)
    conversation.messages.append({"role": "assistant", "content": "", "tool_calls": [_call(tag)]})
    conversation.messages.append({"role": "tool", "tool_call_id": tag, "content": "r-" + tag})


def test_the_store_lives_under_toolwire_home(home: Path) -> None:
    assert default_path() == home / "toolwire.db"
    store = ConversationStore()
    store.open("c1")
    assert (home / "toolwire.db").is_file()
    con = sqlite3.connect(home / "toolwire.db")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    con.close()


def test_a_new_conversation_keeps_its_settings_resolved_and_a_resume_brings_them_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOLWIRE_TOOL_FORMAT", "llama3")
    store = ConversationStore()
    made = store.open("c1", settings={"strict": True, "max_tool_iters": 3}, model="m")
    assert made.settings["strict"] is True and made.settings["max_tool_iters"] == 3
    assert made.settings["tool_format"] == "llama3"  # the environment of its first run, kept
    monkeypatch.delenv("TOOLWIRE_TOOL_FORMAT")
    again = store.open("c1", settings={"strict": False, "tool_format": "hermes"})
    # a resume never rewrites what the conversation keeps
    assert again.settings == made.settings and again.id == made.id and again.model == "m"
    assert again.created == made.created


def test_messages_calls_results_session_and_model_are_kept() -> None:
    store = ConversationStore()
    conversation = store.open("c1")
    _step(conversation, "a")
    conversation.messages.append({"role": "assistant", "content": "done ✓ \ud800"})
    conversation.session["workspace"] = "/tmp/w"
    conversation.model = "qwen"
    assert store.save(conversation) == 4
    back = store.get("c1")
    assert back.messages == conversation.messages
    assert back.session == {"workspace": "/tmp/w"} and back.model == "qwen"
    assert back.updated >= back.created
    assert store.save(back) == 0  # nothing new


def test_a_call_without_its_results_is_not_stored() -> None:
    store = ConversationStore()
    conversation = store.open("c1")
    conversation.add_user("q")
    two = {"role": "assistant", "content": "", "tool_calls": [_call("x"), _call("y")]}
    conversation.messages.append(two)
    conversation.messages.append({"role": "tool", "tool_call_id": "x", "content": "1"})
    assert store.save(conversation) == 1  # the user message; the call waits for y's result
    assert store.get("c1").messages == [{"role": "user", "content": "q"}]
    conversation.messages.append({"role": "tool", "tool_call_id": "y", "content": "2"})
    assert store.save(conversation) == 3
    assert store.get("c1").messages == conversation.messages


def test_the_loop_commits_each_step_before_its_next_request() -> None:
    """When the second request reaches the server, the first step is already in the file."""
    box = Toolbox()
    seen: list[list[dict[str, Any]]] = []

    @box.tool(read_only=True)
    def f() -> str:
        """A tool."""
        return "r"

    store = ConversationStore()
    conversation = store.open("c1")
    with FakeOpenAIServer() as server:
        server.add_stream(tool_call_deltas([("k1", "f", "{}")]), finish_reason="tool_calls")
        server.add_stream(text_deltas("answer"))
        conversation.add_user("go")
        backend = OpenAIBackend("m", base_url=server.base_url)
        for event in run_loop_sync(backend, conversation, box):
            if isinstance(event, ToolResult):
                seen.append(store.get("c1").messages)  # the result is out; not yet stored
            if isinstance(event, TextDelta) and len(seen) == 1:
                seen.append(store.get("c1").messages)  # the next request is under way
    assert seen[0] == []
    assert [m["role"] for m in seen[1]] == ["user", "assistant", "tool"]
    assert [m["role"] for m in store.get("c1").messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_list_show_and_delete() -> None:
    store = ConversationStore()
    assert store.summaries() == []
    first = store.open("first", model="a")
    _step(first, "x")
    first.commit()
    time.sleep(0.01)
    store.open("second", model="b")
    rows = store.summaries()
    assert [(r["name"], r["messages"], r["model"]) for r in rows] == [
        ("second", 0, "b"),
        ("first", 3, "a"),
    ]
    assert store.exists("first")
    store.delete("first")
    assert not store.exists("first")
    with pytest.raises(UsageError, match="no conversation named 'first'"):
        store.delete("first")
    with pytest.raises(UsageError, match="no conversation named 'nope'"):
        store.get("nope")
    with pytest.raises(StoreError) as gone:
        first.commit()  # deleted under it: said, not silently re-made
    assert gone.value.kind == "gone"


@pytest.mark.parametrize("name", ["", "   ", "a\nb", "x" * 201, 7])
def test_bad_names_are_refused(name: Any) -> None:
    with pytest.raises(UsageError, match="name"):
        ConversationStore().open(name)


def test_to_json_has_every_message() -> None:
    store = ConversationStore()
    conversation = store.open("c1", settings={"tool_format": "hermes"})
    _step(conversation, "a")
    conversation.commit()
    data = store.get("c1").to_json()
    assert set(data) == {
        "name",
        "id",
        "model",
        "settings",
        "session",
        "created",
        "updated",
        "messages",
    }
    assert data["name"] == "c1" and len(data["messages"]) == 3
    assert data["settings"]["tool_format"] == "hermes"


# -- files the store cannot use


def _snapshot(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.parent.iterdir())}


def test_a_file_that_is_not_a_database_is_refused_and_left_as_it_is(home: Path) -> None:
    home.mkdir()
    path = home / "toolwire.db"
    path.write_bytes(b"these are somebody's notes, not a database\n" * 10)
    before = _snapshot(path)
    with pytest.raises(StoreError, match="not a conversation store") as refused:
        ConversationStore().open("c1")
    assert refused.value.kind == "corrupt"
    assert _snapshot(path) == before  # no journal, no WAL, not a byte changed


def test_a_damaged_database_is_refused_and_left_as_it_is(home: Path) -> None:
    store = ConversationStore()
    conversation = store.open("c1")
    for i in range(40):
        _step(conversation, f"step {i} " + "x" * 200)
    conversation.commit()
    con = sqlite3.connect(store.path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(store.path.read_bytes())
    data[100:] = b"\xff" * (len(data) - 100)  # every page after the header scribbled over
    store.path.write_bytes(bytes(data))
    before = _snapshot(store.path)
    for attempt in (lambda: store.get("c1"), lambda: store.open("c2"), store.summaries):
        with pytest.raises(StoreError) as refused:
            attempt()
        assert refused.value.kind == "corrupt"
        assert "left as it is" in str(refused.value)
    assert _snapshot(store.path) == before


def test_a_store_from_a_newer_toolwire_is_refused_and_left_as_it_is(home: Path) -> None:
    store = ConversationStore()
    _step(conversation := store.open("c1"), "a")
    conversation.commit()
    con = sqlite3.connect(store.path)
    con.execute("PRAGMA journal_mode = DELETE")
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    before = _snapshot(store.path)
    with pytest.raises(StoreError, match="newer toolwire") as refused:
        store.open("c1")
    assert refused.value.kind == "newer"
    assert _snapshot(store.path) == before


def test_a_newer_version_still_in_the_write_ahead_log_is_refused_too(home: Path) -> None:
    """The file's header lags behind a WAL; SQLite's own answer is checked before writing."""
    store = ConversationStore()
    store.open("c1")
    holder = sqlite3.connect(store.path)  # kept open: its write stays in the WAL
    holder.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    header_version = int.from_bytes(store.path.read_bytes()[60:64], "big")
    assert header_version == SCHEMA_VERSION  # the header alone would not tell
    with pytest.raises(StoreError, match="newer toolwire"):
        store.open("c2")
    assert holder.execute("SELECT name FROM conversations").fetchall() == [("c1",)]
    holder.close()


def test_migrations_are_versioned_and_bring_an_empty_file_to_the_latest(home: Path) -> None:
    assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION + 1))
    home.mkdir()
    (home / "toolwire.db").write_bytes(b"")  # an empty file is a new store
    ConversationStore().open("c1")
    con = sqlite3.connect(home / "toolwire.db")
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"conversations", "messages", "lessons"} <= tables
    con.close()


def test_a_writer_waits_for_another_and_says_so_when_it_waited_too_long() -> None:
    store = ConversationStore()
    conversation = store.open("c1")
    _step(conversation, "a")
    holder = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    impatient = ConversationStore(timeout=0.2)
    with pytest.raises(StoreError, match="busy") as busy:
        impatient.save(conversation)
    assert busy.value.kind == "busy"
    threading.Timer(0.3, lambda: holder.execute("COMMIT")).start()
    assert ConversationStore(timeout=10).save(conversation) == 3  # waited its turn
    holder.close()


_WRITER = """
import sys, time
from pathlib import Path
from toolwire.store import ConversationStore
path, tag, count, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
store = ConversationStore(path)
conversation = store.open("shared")
while not go.exists():
    time.sleep(0.005)
for i in range(count):
    cid = f"{tag}-{i}"
    conversation.add_user(cid)
    call = {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    conversation.messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
    conversation.messages.append({"role": "tool", "tool_call_id": cid, "content": "r"})
    conversation.commit()
"""


def test_two_processes_writing_one_conversation_take_turns(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    ConversationStore(path).open("shared")
    go = tmp_path / "go"
    count = 60
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), tag, str(count), str(go)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("A", "B")
    ]
    time.sleep(1.0)  # both started and waiting
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    messages = ConversationStore(path).get("shared").messages
    assert len(messages) == 2 * count * 3
    steps = [messages[i : i + 3] for i in range(0, len(messages), 3)]
    for user, call, result in steps:  # every step whole: never another's message inside
        cid = user["content"]
        assert call["tool_calls"][0]["id"] == cid and result["tool_call_id"] == cid
    for tag in ("A", "B"):
        mine = [s[0]["content"] for s in steps if s[0]["content"].startswith(tag)]
        assert mine == [f"{tag}-{i}" for i in range(count)]  # each in its own order
    con = sqlite3.connect(path)
    seqs = [r[0] for r in con.execute("SELECT seq FROM messages ORDER BY seq")]
    con.close()
    assert seqs == list(range(1, len(messages) + 1))


# -- what the pipeline learned about models, kept beside the conversations


def test_model_memory_kept_in_the_store_is_known_to_the_next_process() -> None:
    store = ConversationStore()
    memory = ModelMemory(store=store)
    memory.learn("http://a/v1/", "m", words=True)
    memory.learn("http://a/v1/", "n", dialect="strict")
    later = ModelMemory(store=ConversationStore())  # as a new process would make it
    assert later.recall("http://a/v1/", "m").words
    assert later.recall("http://a/v1/", "n").dialect == "strict"
    later.forget("http://a/v1/", "m")
    assert not ModelMemory(store=store).recall("http://a/v1/", "m").words
    later.reset()
    assert len(ModelMemory(store=store)) == 0


def test_model_memory_in_the_store_keeps_its_bound() -> None:
    store = ConversationStore()
    memory = ModelMemory(2, store=store)
    for name in ("a", "b", "c"):
        memory.learn("e", name, words=True)
    assert [entry["model"] for entry in store.load_lessons()] == ["b", "c"]
    assert len(ModelMemory(2, store=store)) == 2


def test_a_lesson_the_pipeline_learns_reaches_the_store() -> None:
    store = ConversationStore()
    with FakeOpenAIServer() as server:
        server.add_error(400, {"message": "gemma:2b does not support tools"})
        server.add_error(400, {"message": "gemma:2b does not support tools"})  # the probe
        server.add_stream(text_deltas("no call"))
        backend = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory(store=store))
        conversation = StoredConversation()
        conversation.add_user("hi")
        list(run_loop_sync(backend, conversation, _box()))
        endpoint = backend.endpoint
    kept = ModelMemory(store=ConversationStore()).recall(endpoint, "m")
    assert kept.words and kept.source == "probe" and kept.until is not None


def _box() -> Toolbox:
    box = Toolbox()

    @box.tool(read_only=True)
    def f() -> str:
        """A tool."""
        return "r"

    return box


def test_a_store_at_an_older_version_is_migrated_in_place_keeping_its_conversations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A later schema version (made up here) is applied to a store of this one, once."""
    from toolwire.store import db

    store = ConversationStore()
    _step(conversation := store.open("c1"), "a")
    conversation.commit()
    later = {**MIGRATIONS, SCHEMA_VERSION + 1: ("ALTER TABLE conversations ADD COLUMN tag TEXT",)}
    monkeypatch.setattr(db, "MIGRATIONS", later)
    monkeypatch.setattr(db, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    assert store.get("c1").messages == conversation.messages
    con = sqlite3.connect(store.path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
    columns = [r[1] for r in con.execute("PRAGMA table_info(conversations)")]
    con.close()
    assert columns.count("tag") == 1
    assert len(store.summaries()) == 1  # opened again: nothing applied twice
