"""The gateway's responses in one SQLite file of their own (the default store).

The file is the gateway's alone (``gateway.db`` in :func:`toolwire.store.home`), apart from
the CLI's conversations: a client of the gateway can reach nothing a ``toolwire chat`` user
kept. Each operation opens its own connection (the gateway calls it from worker threads, and
several gateway processes may share the file); each write is one ``BEGIN IMMEDIATE``
transaction, so a process killed mid-write leaves the file as it was before the write, and
two writers of one owner take turns (the quota is checked inside the write, from the owner's
running totals, ``response_owners``, which triggers keep in step with its rows). Errors never
name the file: they may reach a log that clients' operators share, and the path is the
host's.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .responses import (
    HistoryTooLong,
    QuotaExceeded,
    StoredResponse,
    StoreLimits,
    StoreUsage,
)

__all__ = ["SqliteResponseStore", "chain_query", "stored_size"]

#: Each owner's live responses and their bytes, as a running total: a write reads one row
#: here, never a scan of the owner's responses (which would hold the store's one write lock
#: as long as the owner's volume takes to count).
TOTALS_TABLE = """CREATE TABLE IF NOT EXISTS response_owners (
        owner TEXT PRIMARY KEY,
        responses BIGINT NOT NULL,
        bytes BIGINT NOT NULL
    )"""
#: Version 2: each response's size counts every byte of its row (its model's name, its ids,
#: not only its JSON), and each owner's totals are kept in ``response_owners``.
_VERSION = 2
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS responses (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        model TEXT NOT NULL,
        previous TEXT,
        body TEXT NOT NULL,
        count INTEGER NOT NULL,
        size INTEGER NOT NULL,
        created REAL NOT NULL,
        expires REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS responses_owner ON responses (owner, expires)",
    "CREATE INDEX IF NOT EXISTS responses_expires ON responses (expires)",
    TOTALS_TABLE,
)
#: Each owner's totals follow its rows in the transaction that writes them, whichever
#: statement adds, removes or moves a row (a put, a delete, expiry, an operator's own SQL).
_TRIGGERS = (
    """CREATE TRIGGER IF NOT EXISTS responses_added AFTER INSERT ON responses BEGIN
        INSERT INTO response_owners (owner, responses, bytes) VALUES (NEW.owner, 1, NEW.size)
        ON CONFLICT (owner) DO UPDATE SET responses = responses + 1,
            bytes = bytes + excluded.bytes;
    END""",
    """CREATE TRIGGER IF NOT EXISTS responses_removed AFTER DELETE ON responses BEGIN
        UPDATE response_owners SET responses = responses - 1, bytes = bytes - OLD.size
        WHERE owner = OLD.owner;
    END""",
    """CREATE TRIGGER IF NOT EXISTS responses_moved AFTER UPDATE OF owner, size ON responses
    BEGIN
        UPDATE response_owners SET responses = responses - 1, bytes = bytes - OLD.size
        WHERE owner = OLD.owner;
        INSERT INTO response_owners (owner, responses, bytes) VALUES (NEW.owner, 1, NEW.size)
        ON CONFLICT (owner) DO UPDATE SET responses = responses + 1,
            bytes = bytes + excluded.bytes;
    END""",
)
_MAGIC = b"SQLite format 3\x00"


#: The bytes of a row besides its text: its count, size, created and expires (8 each).
ROW_NUMBERS = 32


def stored_size(response: StoredResponse, body: str) -> int:
    """Every byte a response's row holds: its JSON ``body``, its id, owner, model and the id
    it continued (UTF-8), and its numbers: what its owner's quota counts."""
    texts = (body, response.id, response.owner, response.model, response.previous or "")
    return sum(len(text.encode()) for text in texts) + ROW_NUMBERS


def size_sql(length: str) -> str:
    """:func:`stored_size` in SQL, ``length`` the database's byte length of a text ``{}``
    (to count the rows of an older store once, when it is migrated)."""
    columns = ("body", "id", "owner", "model")
    summed = " + ".join(length.format(c) for c in columns)
    return f"{summed} + coalesce({length.format('previous')}, 0) + {ROW_NUMBERS}"


#: Fill ``response_owners`` from the rows (once, when an older store is migrated).
COUNT_OWNERS = (
    "INSERT INTO response_owners (owner, responses, bytes) "
    "SELECT owner, count(*), sum(size) FROM responses GROUP BY owner"
)
#: An owner's live totals: the running totals less its rows expired but not yet deleted
#: (read by the index on (owner, expires), the expired rows only). Parameters: owner three
#: times, now.
USAGE_QUERY = """SELECT
        coalesce((SELECT responses FROM response_owners WHERE owner = {p}), 0) - count(*),
        coalesce((SELECT bytes FROM response_owners WHERE owner = {p}), 0)
            - coalesce(sum(size), 0)
    FROM responses WHERE owner = {p} AND expires <= {p}"""


def chain_query(param: str) -> str:
    """The walk from one response back through the ones it continued, as a recursive query
    (SQLite's and PostgreSQL's alike, ``param`` their placeholder): each row carries the
    totals so far, and the walk stops at the first row past a limit, so a chain past the
    limits is read no further than the limits. Parameters: id, max depth, max bytes, max
    messages."""
    p = param
    return f"""
        WITH RECURSIVE chain(id, previous, owner, expires, depth, bytes, messages) AS (
            SELECT id, previous, owner, expires, 1, size, count FROM responses WHERE id = {p}
            UNION ALL
            SELECT r.id, r.previous, r.owner, r.expires, c.depth + 1,
                   c.bytes + r.size, c.messages + r.count
            FROM responses r JOIN chain c ON r.id = c.previous
            WHERE c.depth < {p} AND c.bytes <= {p} AND c.messages <= {p}
        )
        SELECT id, previous, owner, expires, depth, bytes, messages FROM chain ORDER BY depth
    """


def check_chain(
    rows: list[tuple[Any, ...]], owner: str, now: float, limits: StoreLimits
) -> list[str] | None:
    """The ids of a walked chain, newest first, when it is whole, the owner's and alive;
    None when not; :class:`HistoryTooLong` past the limits."""
    if not rows:
        return None
    *_, last = rows
    if last[5] > limits.history_bytes:
        raise HistoryTooLong(
            f"the conversation is longer than the store keeps ({limits.history_bytes} bytes)",
            "bytes",
        )
    if last[6] > limits.history_messages or len(rows) > limits.history_messages:
        raise HistoryTooLong(
            f"the conversation is longer than the store keeps ({limits.history_messages} messages)",
            "messages",
        )
    if last[1] is not None:
        return None  # an earlier response of the chain is gone
    if any(row[2] != owner or row[3] <= now for row in rows):
        return None
    return [row[0] for row in rows]


def body_of(response: StoredResponse) -> tuple[str, int]:
    """A response's stored JSON and its message count."""
    try:
        body = json.dumps({"messages": response.messages, "pending": response.pending})
    except (TypeError, ValueError) as exc:
        raise StoreError(f"the response cannot be stored as JSON: {exc}", kind="corrupt") from None
    return body, len(response.messages) + len(response.pending)


def response_of(row: tuple[Any, ...]) -> StoredResponse:
    """A stored row (id, owner, model, previous, body, created, expires, size) as a response."""
    rid, owner, model, previous, body, created, expires, size = row
    data = json.loads(body)
    return StoredResponse(
        id=rid,
        owner=owner,
        model=model,
        previous=previous,
        messages=data["messages"],
        pending=data["pending"],
        created=created,
        expires=expires,
        size=size,
    )


def quota_error(limits: StoreLimits, responses: int, used: int, size: int) -> QuotaExceeded | None:
    """Why one more response of ``size`` bytes passes an owner's quota, or None."""
    if responses + 1 > limits.key_responses:
        return QuotaExceeded(
            f"this key keeps {limits.key_responses} responses already, as many as the store "
            "allows: send store: false, or wait for older ones to expire",
            "responses",
        )
    if used + size > limits.key_bytes:
        return QuotaExceeded(
            f"this key's stored responses would pass the {limits.key_bytes} bytes the store "
            "allows it: send store: false, or wait for older ones to expire",
            "bytes",
        )
    return None


class SqliteResponseStore:
    """The :class:`~toolwire.store.responses.ResponseStore` in one SQLite file."""

    def __init__(
        self,
        path: Path,
        limits: StoreLimits | None = None,
        *,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.limits = limits or StoreLimits()
        self.timeout = timeout
        self.clock = clock
        self._ready = False

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db: sqlite3.Connection | None = None
        try:
            if not self._ready:
                self._check_header()
                self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000):d}")
            if not self._ready:
                self._migrate(db)
                self._ready = True
            yield db
        except OSError as exc:
            raise StoreError(
                f"the response store cannot be used: {exc.strerror}", kind="corrupt"
            ) from None
        except sqlite3.OperationalError as exc:
            busy = "locked" in str(exc) or "busy" in str(exc)
            raise StoreError(
                "the response store was busy too long"
                if busy
                else f"the response store cannot be used: {exc}",
                kind="busy" if busy else "corrupt",
            ) from None
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"the response store is damaged: {exc}", kind="corrupt") from None
        finally:
            if db is not None:
                db.close()

    def _check_header(self) -> None:
        try:
            with self.path.open("rb") as f:
                header = f.read(100)
        except FileNotFoundError:
            return
        if header and (len(header) < 100 or not header.startswith(_MAGIC)):
            raise StoreError("the response store's file is not an SQLite database", kind="corrupt")

    def _migrate(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > _VERSION:
                raise StoreError(
                    f"the response store has schema version {version}, made by a newer "
                    f"toolwire (this one knows {_VERSION})",
                    kind="newer",
                )
            for statement in _SCHEMA:
                db.execute(statement)
            if version < 2:  # every row's size counted whole, then the totals, once
                db.execute("UPDATE responses SET size = " + size_sql("length(CAST({} AS BLOB))"))
                db.execute("DELETE FROM response_owners")
                db.execute(COUNT_OWNERS)
            for statement in _TRIGGERS:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {_VERSION:d}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        self._wal(db)
        db.execute("PRAGMA synchronous = FULL")

    def _wal(self, db: sqlite3.Connection) -> None:
        """Turn the file to WAL, once (the mode is kept in the file). SQLite answers a switch
        of journal mode with "locked" at once, its busy handler not asked, while another
        connection holds the file, as gateways starting together do: so it is retried, each
        try after a short pause, up to the store's timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def _chain(self, db: sqlite3.Connection, rid: str, owner: str) -> list[str] | None:
        lim = self.limits
        rows = db.execute(
            chain_query("?"),
            (rid, lim.history_messages + 1, lim.history_bytes, lim.history_messages),
        ).fetchall()
        return check_chain(rows, owner, self.clock(), lim)

    def put(self, response: StoredResponse) -> StoredResponse:
        body, count = body_of(response)
        size = stored_size(response, body)
        now = self.clock()
        kept = StoredResponse(
            id=response.id,
            owner=response.owner,
            model=response.model,
            previous=response.previous,
            messages=response.messages,
            pending=response.pending,
            created=now,
            expires=now + self.limits.ttl,
            size=size,
        )
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM responses WHERE expires <= ?", (now,))
                responses, used = db.execute(
                    "SELECT responses, bytes FROM response_owners WHERE owner = ?",
                    (response.owner,),
                ).fetchone() or (0, 0)
                refused = quota_error(self.limits, responses, used, size)
                if refused is not None:
                    raise refused
                db.execute(
                    "INSERT INTO responses (id, owner, model, previous, body, count, size, "
                    "created, expires) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        kept.id,
                        kept.owner,
                        kept.model,
                        kept.previous,
                        body,
                        count,
                        size,
                        now,
                        kept.expires,
                    ),
                )
                if kept.previous is not None:
                    try:
                        ids = self._chain(db, kept.previous, kept.owner) or []
                    except HistoryTooLong:
                        ids = []
                    db.executemany(
                        "UPDATE responses SET expires = max(expires, ?) WHERE id = ?",
                        [(kept.expires, i) for i in ids],
                    )
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return kept

    _COLUMNS = "id, owner, model, previous, body, created, expires, size"

    def get(self, rid: str, owner: str) -> StoredResponse | None:
        with self._db() as db:
            row = db.execute(
                f"SELECT {self._COLUMNS} FROM responses WHERE id = ? AND owner = ? AND expires > ?",
                (rid, owner, self.clock()),
            ).fetchone()
        return response_of(row) if row else None

    def history(self, rid: str, owner: str) -> list[StoredResponse] | None:
        with self._db() as db:
            ids = self._chain(db, rid, owner)
            if ids is None:
                return None
            found: dict[str, StoredResponse] = {}
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                marks = ", ".join("?" * len(part))
                for row in db.execute(
                    f"SELECT {self._COLUMNS} FROM responses WHERE id IN ({marks})", part
                ):
                    found[row[0]] = response_of(row)
        if len(found) != len(ids):
            return None  # forgotten between the walk and the read
        return [found[i] for i in reversed(ids)]

    def delete(self, rid: str, owner: str) -> bool:
        with self._db() as db:
            gone = db.execute(
                "DELETE FROM responses WHERE id = ? AND owner = ? AND expires > ?",
                (rid, owner, self.clock()),
            ).rowcount
        return bool(gone)

    def usage(self, owner: str) -> StoreUsage:
        with self._db() as db:
            responses, used = db.execute(
                USAGE_QUERY.format(p="?"), (owner, owner, owner, self.clock())
            ).fetchone()
        return StoreUsage(responses, used)

    def purge(self) -> int:
        with self._db() as db:
            return int(
                db.execute("DELETE FROM responses WHERE expires <= ?", (self.clock(),)).rowcount
            )

    def close(self) -> None:
        """Nothing stays open between operations."""
