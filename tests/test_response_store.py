"""The response store's contract (toolwire.store.responses), kept alike by the SQLite store
and the PostgreSQL one: owners, limits, quotas, expiry, concurrent writers (threads, and two
store objects on one database: two gateways), and a writer killed with SIGKILL mid-write.

The PostgreSQL cases use the real server $TOOLWIRE_TEST_POSTGRES names (tests/postgres_server.py),
each in a schema of its own."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from toolwire.errors import StoreError, UsageError
from toolwire.store import open_response_store
from toolwire.store.responses import (
    HistoryTooLong,
    QuotaExceeded,
    StoredResponse,
    StoreLimits,
    new_response_id,
)
from toolwire.store.responses_sqlite import SqliteResponseStore, chain_query, stored_size

from .postgres_server import fresh_schema, server_url

SRC = str(Path(__file__).resolve().parents[1] / "src")
#: a subprocess's environment: this checkout's toolwire first
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p),
}


class Clock:
    """A clock the test moves."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Backend:
    """One kind of store, opened as often as a test likes (each a gateway of its own)."""

    kind: str
    #: what ``--store`` takes for it
    where: str
    opened: list[Any] = field(default_factory=list)

    def open(
        self, limits: StoreLimits | None = None, clock: Callable[[], float] = time.time
    ) -> Any:
        if self.kind == "sqlite":
            store: Any = SqliteResponseStore(Path(self.where), limits, clock=clock)
        else:
            from toolwire.store.responses_pg import PostgresResponseStore

            store = PostgresResponseStore(self.where, limits, clock=clock)
        self.opened.append(store)
        return store

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run ``statement`` on the database itself (``?`` placeholders), not by the store."""
        if self.kind == "sqlite":
            db = sqlite3.connect(self.where, isolation_level=None)
            try:
                return db.execute(statement, params).fetchall()
            finally:
                db.close()
        import psycopg

        with psycopg.connect(self.where, autocommit=True) as conn:
            cur = conn.execute(statement.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        made = Backend("sqlite", str(tmp_path / "gateway.db"))
        yield made
    else:
        with fresh_schema() as url:
            made = Backend("postgresql", url)
            try:
                yield made
            finally:
                for store in made.opened:
                    store.close()


def said(text: str, n: int = 1, role: str = "user") -> list[dict[str, Any]]:
    return [{"role": role, "content": f"{text} {i}"} for i in range(n)]


def response(owner: str = "alice", previous: str | None = None, **kw: Any) -> StoredResponse:
    return StoredResponse(
        id=new_response_id(),
        owner=owner,
        model="m",
        previous=previous,
        messages=kw.pop("messages", said("hi")),
        **kw,
    )


def chain(store: Any, n: int, owner: str = "alice") -> list[StoredResponse]:
    made: list[StoredResponse] = []
    for i in range(n):
        made.append(
            store.put(response(owner, made[-1].id if made else None, messages=said(str(i))))
        )
    return made


def test_put_get_history_delete_usage_purge(backend: Backend) -> None:
    clock = Clock()
    store = backend.open(StoreLimits(ttl=100), clock)
    pending = [{"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f"}}]}]
    first = store.put(response(messages=said("hi", 2), pending=pending))
    assert (first.created, first.expires) == (clock.now, clock.now + 100) and first.size > 0
    got = store.get(first.id, "alice")
    assert got == first and got.messages == said("hi", 2) and got.pending == pending
    second = store.put(response(previous=first.id, messages=said("again", role="assistant")))
    assert [r.id for r in store.history(second.id, "alice")] == [first.id, second.id]
    usage = store.usage("alice")
    assert (usage.responses, usage.bytes) == (2, first.size + second.size)
    assert store.delete(first.id, "alice") is True
    assert store.delete(first.id, "alice") is False
    assert store.history(second.id, "alice") is None  # a response of the chain is gone
    assert store.get(second.id, "alice") == second
    clock.now += 101
    assert store.get(second.id, "alice") is None and store.usage("alice").responses == 0
    assert store.purge() == 1 and store.purge() == 0
    assert backend.sql("SELECT count(*) FROM responses") == [(0,)]


def test_another_owners_response_is_none(backend: Backend) -> None:
    store = backend.open()
    mine = store.put(response("alice"))
    assert store.get(mine.id, "bob") is None
    assert store.history(mine.id, "bob") is None
    assert store.delete(mine.id, "bob") is False
    # bob continuing alice's id gets no history of hers, and keeps her response no longer
    expires = store.get(mine.id, "alice").expires
    theirs = store.put(response("bob", previous=mine.id))
    assert store.history(theirs.id, "bob") is None
    assert store.get(mine.id, "alice").expires == expires
    assert store.usage("bob").responses == 1 and store.usage("alice").responses == 1


def test_history_past_the_limits_is_refused_having_read_no_further(backend: Backend) -> None:
    store = backend.open(StoreLimits(history_messages=5))
    made = chain(store, 40)
    assert [r.id for r in store.history(made[4].id, "alice")] == [r.id for r in made[:5]]
    with pytest.raises(HistoryTooLong) as raised:
        store.history(made[-1].id, "alice")
    assert raised.value.what == "messages"
    # the walk itself stops at the first row past a limit: six rows of forty
    limits = store.limits
    params = (made[-1].id, limits.history_messages + 1, limits.history_bytes, 5)
    assert len(backend.sql(chain_query("?"), params)) == 6
    # a cycle (made in the database behind the store's back) ends the walk all the same
    backend.sql("UPDATE responses SET previous = ? WHERE id = ?", (made[-1].id, made[0].id))
    with pytest.raises(HistoryTooLong):
        store.history(made[-1].id, "alice")
    by_bytes = backend.open(StoreLimits(history_bytes=made[0].size * 3))
    with pytest.raises(HistoryTooLong) as raised:
        by_bytes.history(made[10].id, "alice")
    assert raised.value.what == "bytes"


def test_a_quota_refuses_and_writes_nothing(backend: Backend) -> None:
    store = backend.open(StoreLimits(key_responses=2))
    first, second = chain(store, 2)
    refused = response(previous=second.id)
    with pytest.raises(QuotaExceeded) as raised:
        store.put(refused)
    assert raised.value.what == "responses"
    assert store.get(refused.id, "alice") is None and store.usage("alice").responses == 2
    assert store.put(response("bob")).owner == "bob"  # another owner's quota is its own
    small = backend.open(StoreLimits(key_bytes=first.size * 3))
    with pytest.raises(QuotaExceeded) as raised:
        small.put(response(messages=said("x" * 100)))
    assert raised.value.what == "bytes"
    assert backend.sql("SELECT count(*) FROM responses") == [(3,)]


def test_a_continuation_keeps_its_history_alive(backend: Backend) -> None:
    clock = Clock()
    store = backend.open(StoreLimits(ttl=100), clock)
    first = store.put(response())
    clock.now += 75
    second = store.put(response(previous=first.id))
    clock.now += 50  # past the first's own ttl, within the second's
    assert [r.id for r in store.history(second.id, "alice")] == [first.id, second.id]
    assert store.purge() == 0
    clock.now += 51
    assert store.history(second.id, "alice") is None
    assert store.purge() == 2


def test_an_expired_response_is_gone_even_unpurged(backend: Backend) -> None:
    store = backend.open()
    kept = store.put(response())
    backend.sql("UPDATE responses SET expires = ? WHERE id = ?", (time.time() - 1, kept.id))
    assert store.get(kept.id, "alice") is None
    assert store.delete(kept.id, "alice") is False
    assert store.usage("alice").responses == 0
    # the quota counts only live responses
    assert backend.open(StoreLimits(key_responses=1)).put(response()).owner == "alice"


@pytest.mark.parametrize("gateways", [1, 2], ids=["threads", "two-gateways"])
def test_concurrent_writers_cannot_pass_the_quota_together(backend: Backend, gateways: int) -> None:
    limits = StoreLimits(key_responses=5)
    stores = [backend.open(limits) for _ in range(gateways)]
    stores[0].usage("alice")  # the schema made before the race (it is raced below)
    writers = 16
    start = threading.Barrier(writers)
    results: list[str] = []

    def write(i: int) -> None:
        start.wait()
        try:
            stores[i % gateways].put(response())
            results.append("kept")
        except QuotaExceeded:
            results.append("refused")

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(results) == ["kept"] * 5 + ["refused"] * 11
    assert stores[-1].usage("alice").responses == 5
    assert backend.sql("SELECT count(*) FROM responses") == [(5,)]


def test_two_gateways_continue_each_others_chains(backend: Backend) -> None:
    a, b = backend.open(), backend.open()
    first = a.put(response())
    second = b.put(response(previous=first.id))
    third = a.put(response(previous=second.id))
    for store in (a, b):
        assert [r.id for r in store.history(third.id, "alice")] == [first.id, second.id, third.id]
    assert b.delete(first.id, "alice") and a.history(third.id, "alice") is None


def test_two_gateways_making_the_schema_at_once(backend: Backend) -> None:
    stores = [backend.open() for _ in range(4)]
    start = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def first_use(store: Any) -> None:
        start.wait()
        try:
            store.put(response())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=first_use, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert stores[0].usage("alice").responses == 4


def test_a_store_of_a_newer_toolwire_is_refused(backend: Backend) -> None:
    backend.open().usage("alice")
    if backend.kind == "sqlite":
        backend.sql("PRAGMA user_version = 99")
    else:
        backend.sql("UPDATE toolwire_store SET version = 99 WHERE name = 'responses'")
    with pytest.raises(StoreError) as raised:
        backend.open().get("resp_x", "alice")
    assert raised.value.kind == "newer"


WRITER = """
import sys
from toolwire.store import open_response_store
from toolwire.store.responses import StoredResponse, new_response_id

store = open_response_store(sys.argv[1])
previous = None
big = [{"role": "user", "content": "x" * 2000 + str(i)} for i in range(50)]
while True:
    kept = store.put(StoredResponse(new_response_id(), "alice", "m", previous, big))
    previous = kept.id
    print(kept.id, flush=True)
"""


def test_a_writer_killed_mid_write_leaves_every_response_whole(backend: Backend) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, backend.where],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
        text=True,
    )
    assert writer.stdout is not None
    reported: list[str] = []
    try:
        while len(reported) < 15:
            line = writer.stdout.readline()
            assert line, writer.stderr.read() if writer.stderr else "the writer ended"
            reported.append(line.strip())
        time.sleep(0.05)
    finally:
        writer.send_signal(signal.SIGKILL)
        rest, _ = writer.communicate(timeout=30)
    assert writer.returncode == -signal.SIGKILL
    reported += rest.split()
    store = backend.open()
    for rid in reported:
        got = store.get(rid, "alice")
        assert got is not None and len(got.messages) == 50
        assert got.messages[-1]["content"] == "x" * 2000 + "49"
    history = store.history(reported[-1], "alice")
    assert history is not None and [r.id for r in history] == reported
    if backend.kind == "sqlite":
        assert backend.sql("PRAGMA integrity_check") == [("ok",)]
    # every row whole: its body is the JSON its size and count say; no more than one
    # written but not yet reported when the writer died
    rows = backend.sql("SELECT id, owner, model, previous, body, size, count FROM responses")
    for rid, owner, model, previous, body, size, count in rows:
        data = json.loads(body)
        row = StoredResponse(rid, owner, model, previous)
        assert stored_size(row, body) == size
        assert len(data["messages"]) + len(data["pending"]) == count
    assert len(reported) <= len(rows) <= len(reported) + 1
    # and the killed writer holds nothing: the owner writes again at once
    began = time.monotonic()
    store.put(response(previous=reported[-1]))
    assert time.monotonic() - began < 5


def test_postgres_errors_name_no_host_user_or_password() -> None:
    pytest.importorskip("psycopg")
    from toolwire.store.responses_pg import PostgresResponseStore

    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the with ends: nothing listens there
    url = f"postgresql://secret_user:hunter2pw@127.0.0.1:{port}/private_db"
    store = PostgresResponseStore(url, timeout=2, connect_timeout=1)
    try:
        assert "hunter2pw" not in repr(store)
        with pytest.raises(StoreError) as raised:
            store.get("resp_x", "alice")
    finally:
        store.close()
    message = str(raised.value)
    for secret in ("hunter2pw", "secret_user", "127.0.0.1", str(port), "private_db"):
        assert secret not in message


def test_a_missing_database_on_a_real_server_names_nothing_of_it() -> None:
    url = server_url()
    from toolwire.store.responses_pg import PostgresResponseStore

    base, _, _ = url.rpartition("/")
    store = PostgresResponseStore(base + "/no_such_db_here", timeout=3)
    try:
        with pytest.raises(StoreError) as raised:
            store.usage("alice")
    finally:
        store.close()
    assert "no_such_db_here" not in str(raised.value) and "toolwire@" not in str(raised.value)


def test_store_urls_open_postgresql(tmp_path: Path) -> None:
    with fresh_schema() as url:
        for scheme in ("postgresql://", "postgres://"):
            store = open_response_store(url.replace("postgresql://", scheme, 1))
            try:
                kept = store.put(response())
                assert store.get(kept.id, "alice") == kept
            finally:
                store.close()
    assert isinstance(open_response_store(tmp_path / "g.db"), SqliteResponseStore)


def test_without_psycopg_a_postgresql_store_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "from toolwire.store import open_response_store\n"
        "open_response_store('postgresql://u:pw@127.0.0.1/db')\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
    )
    assert ran.returncode != 0
    assert "UsageError" in ran.stderr and "pip install 'toolwire[postgres]'" in ran.stderr


def test_usage_error_is_what_a_bad_scheme_is_not(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        open_response_store("mysql://x/y")
    assert issubclass(HistoryTooLong, UsageError)
