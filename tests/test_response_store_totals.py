"""What one owner stores is counted whole, and counted as it changes: the quota counts every
byte a response is kept with (a model's name a client chose included), and each owner's
totals are a running sum kept in the transaction of each write, never a count over the
owner's rows — alike in the SQLite store and the PostgreSQL one; an older store gets its
totals once, when it is migrated."""

from __future__ import annotations

import time
from typing import Any

import pytest

from toolwire.store.responses import QuotaExceeded, StoredResponse, StoreLimits, new_response_id
from toolwire.store.responses_sqlite import stored_size

from .test_response_store import Backend, Clock, backend, response, said

__all__ = ["backend"]  # the fixture, shared with tests/test_response_store.py


def totals(backend: Backend) -> dict[str, tuple[int, int]]:
    """The running totals as the store keeps them."""
    rows = backend.sql("SELECT owner, responses, bytes FROM response_owners")
    return {owner: (int(n), int(b)) for owner, n, b in rows if n}


def counted(backend: Backend, alive_at: float = 0.0) -> dict[str, tuple[int, int]]:
    """The totals counted over the rows themselves (those alive at ``alive_at``)."""
    rows = backend.sql(
        "SELECT owner, count(*), sum(size) FROM responses WHERE expires > ? GROUP BY owner",
        (alive_at,),
    )
    return {owner: (int(n), int(b)) for owner, n, b in rows}


def test_a_model_name_counts_against_the_byte_quota(backend: Backend) -> None:
    # a client names the model (an upstream passed every name): 40 responses of a 100 KB
    # name each would keep 4 MB under a 1 MB quota if only the messages were counted
    store = backend.open(StoreLimits(key_bytes=1024 * 1024))
    name = "m" * 100_000
    kept = 0
    with pytest.raises(QuotaExceeded) as raised:
        for _ in range(40):
            store.put(StoredResponse(new_response_id(), "alice", name, None, said("hi")))
            kept += 1
    assert raised.value.what == "bytes"
    assert kept == 10  # 10 x (100 KB and change) fit in 1 MB; the 11th does not
    usage = store.usage("alice")
    assert usage.responses == kept and 10 * 100_000 < usage.bytes <= 1024 * 1024
    # what a response's size is: every byte of its row
    one = store.put(StoredResponse(new_response_id(), "bob", "gw", None, said("hi")))
    (body,) = backend.sql("SELECT body FROM responses WHERE id = ?", (one.id,))[0]
    assert one.size == stored_size(one, body) > len(body.encode()) + len(one.id)


def test_the_totals_follow_every_write_delete_and_expiry(backend: Backend) -> None:
    clock = Clock()
    store = backend.open(StoreLimits(ttl=100), clock)
    made: list[StoredResponse] = []
    for i in range(60):
        owner = ("alice", "bob", "carol")[i % 3]
        previous = made[-3].id if len(made) >= 3 else None
        made.append(store.put(response(owner, previous, messages=said("x" * i, 1 + i % 4))))
        if i % 7 == 6:
            assert store.delete(made[i - 3].id, made[i - 3].owner)
        if i == 30:
            clock.now += 60  # the first 31 expire at 100, the rest later
    assert totals(backend) == counted(backend)
    clock.now += 41  # past the first ones' ttl: gone for usage, still rows until deleted
    live = counted(backend, alive_at=clock.now)
    assert sum(n for n, _ in live.values()) < sum(n for n, _ in counted(backend).values())
    for owner, (n, size) in live.items():
        usage = store.usage(owner)
        assert (usage.responses, usage.bytes) == (n, size)
    assert totals(backend) == counted(backend)
    store.put(response("alice"))  # a write deletes what expired, and the totals follow
    assert totals(backend) == counted(backend)
    assert totals(backend)["alice"] == counted(backend, alive_at=clock.now)["alice"]
    clock.now += 1000
    assert store.purge() > 0 and totals(backend) == {}


def test_the_quota_is_read_from_the_totals_not_counted(backend: Backend) -> None:
    store = backend.open(StoreLimits(key_bytes=1_000_000, key_responses=1000))
    first = store.put(response())
    # the running total is what a write reads: set past the quota behind the store's
    # back, it refuses though the rows hold one small response
    backend.sql("UPDATE response_owners SET bytes = ? WHERE owner = ?", (999_999, "alice"))
    with pytest.raises(QuotaExceeded) as raised:
        store.put(response())
    assert raised.value.what == "bytes"
    assert store.usage("alice").bytes == 999_999
    backend.sql(
        "UPDATE response_owners SET bytes = ?, responses = ? WHERE owner = ?",
        (first.size, 1000, "alice"),
    )
    with pytest.raises(QuotaExceeded) as raised:
        store.put(response())
    assert raised.value.what == "responses"
    assert store.put(response("bob")).owner == "bob"


V1 = (
    """CREATE TABLE responses (
        id TEXT PRIMARY KEY, owner TEXT NOT NULL, model TEXT NOT NULL, previous TEXT,
        body TEXT NOT NULL, count INTEGER NOT NULL, size BIGINT NOT NULL,
        created DOUBLE PRECISION NOT NULL, expires DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX responses_owner ON responses (owner, expires)",
    "CREATE INDEX responses_expires ON responses (expires)",
)


def test_an_older_store_is_counted_once_when_migrated(backend: Backend) -> None:
    # a store of version 1: its sizes counted the JSON alone, and it kept no totals
    for statement in V1:
        backend.sql(statement)
    if backend.kind == "sqlite":
        backend.sql("PRAGMA user_version = 1")
    else:
        backend.sql("CREATE TABLE toolwire_store (name TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        backend.sql("INSERT INTO toolwire_store (name, version) VALUES ('responses', 1)")
    body = '{"messages": [{"role": "user", "content": "h\\u00e9"}], "pending": []}'
    later = time.time() + 3600
    rows: list[Any] = []
    for i in range(5):
        rid, owner = new_response_id(), ("alice", "bob")[i % 2]
        model = "mod\u00e8le" * (i + 1)
        rows.append(StoredResponse(rid, owner, model, rows[-1].id if rows else None))
        backend.sql(
            "INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (rid, owner, model, rows[-1].previous, body, 1, len(body), time.time(), later),
        )
    store = backend.open()
    for row in rows:
        assert store.get(row.id, row.owner).size == stored_size(row, body)
    assert totals(backend) == counted(backend)
    assert store.usage("alice").bytes == sum(stored_size(r, body) for r in rows[::2])
    assert store.put(response("bob")).owner == "bob"
    assert totals(backend) == counted(backend) and totals(backend)["bob"][0] == 3
