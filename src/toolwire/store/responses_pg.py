"""The gateway's responses in PostgreSQL, for gateways that share one store.

Replicas behind a load balancer each open the same database: a response made through one
is continued through another. The contract is :mod:`toolwire.store.responses`'s, kept as
the SQLite store keeps it, with the same recursive walk of a chain (:func:`chain_query`):

- the schema is made on first use, under an advisory lock (two gateways starting at once
  do not race), with a version row a newer toolwire may raise (this one then refuses it);
- a put is one transaction that first takes an advisory lock on its owner, so the quota
  check and the write of one owner are serialised across every gateway: N concurrent puts
  cannot pass a quota together; a gateway killed mid-write leaves its transaction rolled
  back by the server, its lock released; the quota is read from the owner's running totals
  (``response_owners``, kept by a trigger in the transaction of every write), never counted
  over its rows;
- every method blocks (the gateway calls it off the event loop) and borrows a connection
  from a bounded pool opened in the process that first uses it (``serve --workers N``
  forks before that), with a connect timeout and a statement timeout;
- every error of psycopg becomes a :class:`~toolwire.errors.StoreError` whose message is
  the store's own words and PostgreSQL's error code: the URL holds a password, and the
  server's messages name hosts and users, none of which may reach a log clients share.

A schema other than ``public`` is named in the URL, as libpq takes it:
``postgresql://…/db?options=-csearch_path%3Dtoolwire``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import StoreError, UsageError
from .responses import HistoryTooLong, StoredResponse, StoreLimits, StoreUsage
from .responses_sqlite import (
    COUNT_OWNERS,
    TOTALS_TABLE,
    USAGE_QUERY,
    body_of,
    chain_query,
    check_chain,
    quota_error,
    response_of,
    size_sql,
    stored_size,
)

try:
    import psycopg
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError:  # pragma: no cover - the extra is not installed
    psycopg = None  # type: ignore[assignment]

__all__ = ["PostgresResponseStore", "available"]

#: Version 2: each response's size counts every byte of its row, and each owner's totals
#: are kept in ``response_owners`` (by a trigger: an older gateway still writing keeps them).
_VERSION = 2
#: The first key of the advisory locks this store takes (the second: what is locked), so
#: they do not meet another application's locks on the same database.
_LOCKS = 0x7457  # "tW"
_SCHEMA_LOCK = 0
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS toolwire_store (
        name TEXT PRIMARY KEY,
        version INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS responses (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        model TEXT NOT NULL,
        previous TEXT,
        body TEXT NOT NULL,
        count INTEGER NOT NULL,
        size BIGINT NOT NULL,
        created DOUBLE PRECISION NOT NULL,
        expires DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS responses_owner ON responses (owner, expires)",
    "CREATE INDEX IF NOT EXISTS responses_expires ON responses (expires)",
    TOTALS_TABLE,
)
#: Each owner's totals follow its rows in the transaction that writes them, whichever
#: statement adds, removes or moves a row; the function sees the tables of the schema it
#: was made in, whatever the search path of the statement that fires it.
_TRIGGERS = (
    """CREATE OR REPLACE FUNCTION toolwire_response_totals() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
    BEGIN
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            UPDATE response_owners SET responses = responses - 1, bytes = bytes - OLD.size
            WHERE owner = OLD.owner;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO response_owners AS o (owner, responses, bytes)
            VALUES (NEW.owner, 1, NEW.size)
            ON CONFLICT (owner) DO UPDATE SET responses = o.responses + 1,
                bytes = o.bytes + EXCLUDED.bytes;
        END IF;
        RETURN NULL;
    END $$""",
    "DROP TRIGGER IF EXISTS responses_totals ON responses",
    """CREATE TRIGGER responses_totals AFTER INSERT OR DELETE OR UPDATE OF owner, size
    ON responses FOR EACH ROW EXECUTE FUNCTION toolwire_response_totals()""",
)
_COLUMNS = "id, owner, model, previous, body, created, expires, size"


def _quiet(record: logging.LogRecord) -> bool:
    """The pool's own log of a failed connection, in the store's words: psycopg's message
    names the host, the port, the user and the database."""
    if str(record.msg).startswith("error connecting"):
        record.msg = "a connection to the response store's PostgreSQL server failed"
        record.args = ()
    return True


def available() -> bool:
    """Whether psycopg and psycopg_pool (the ``postgres`` extra) are installed."""
    return psycopg is not None


def _error(exc: Exception) -> StoreError:
    """A psycopg error in words that name no host, user, password or path."""
    if isinstance(exc, PoolTimeout):
        return StoreError(
            "the response store's PostgreSQL server did not give a connection in time",
            kind="busy",
        )
    code = getattr(exc, "sqlstate", None)
    if code in ("55P03", "57014", "40001", "40P01"):  # lock or statement timeout, conflict
        return StoreError(f"the response store was busy too long (PostgreSQL {code})", kind="busy")
    if code is None and not isinstance(exc, psycopg.OperationalError):
        # psycopg's own complaint (no server's code): its class says what, never where
        return StoreError(
            f"the response store cannot be used: {type(exc).__name__}", kind="corrupt"
        )
    if isinstance(exc, psycopg.OperationalError):
        suffix = f" (PostgreSQL {code})" if code else ""
        return StoreError(
            f"the response store's PostgreSQL server cannot be reached or refused the "
            f"connection{suffix}",
            kind="busy",
        )
    return StoreError(f"the response store cannot be used: PostgreSQL error {code}", kind="corrupt")


class PostgresResponseStore:
    """The :class:`~toolwire.store.responses.ResponseStore` in a PostgreSQL database."""

    def __init__(
        self,
        url: str,
        limits: StoreLimits | None = None,
        *,
        pool_size: int = 8,
        timeout: float = 10.0,
        connect_timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if psycopg is None:
            raise UsageError(
                "--store postgresql://… needs psycopg: pip install 'toolwire[postgres]'"
            )
        self._url = url
        self.limits = limits or StoreLimits()
        self.pool_size = pool_size
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.clock = clock
        self._pool: ConnectionPool[Any] | None = None
        self._pid = 0
        self._ready = False
        self._opening = threading.Lock()

    def __repr__(self) -> str:
        return "PostgresResponseStore(<url>)"  # never the URL: it holds a password

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        ms = int(self.timeout * 1000)
        conn.execute(f"SET statement_timeout = {ms:d}")
        conn.execute(f"SET lock_timeout = {ms:d}")

    def _borrow(self) -> ConnectionPool[Any]:
        """The pool of this process, opened on first use; the schema made then."""
        with self._opening:
            if self._pool is None or self._pid != os.getpid():
                # a pool inherited over fork is its parent's: open one of this process
                self._pool = ConnectionPool(
                    self._url,
                    min_size=0,
                    max_size=self.pool_size,
                    timeout=self.timeout,
                    kwargs={
                        "autocommit": True,
                        "connect_timeout": max(1, int(self.connect_timeout)),
                    },
                    configure=self._configure,
                    check=ConnectionPool.check_connection,
                    open=False,
                    name="toolwire-responses",
                )
                pool_log = logging.getLogger("psycopg.pool")
                if _quiet not in pool_log.filters:
                    pool_log.addFilter(_quiet)
                self._pool.open(wait=False)
                self._pid = os.getpid()
            pool = self._pool
            if not self._ready:
                with pool.connection() as conn:
                    self._migrate(conn)
                self._ready = True
        return pool

    @contextmanager
    def _db(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self._borrow().connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise _error(exc) from None

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCKS, _SCHEMA_LOCK))
            for statement in _SCHEMA:
                conn.execute(statement)
            row = conn.execute(
                "SELECT version FROM toolwire_store WHERE name = 'responses'"
            ).fetchone()
            if row is not None and row[0] > _VERSION:
                raise StoreError(
                    f"the response store has schema version {row[0]}, made by a newer "
                    f"toolwire (this one knows {_VERSION})",
                    kind="newer",
                )
            if row is None or row[0] < 2:  # every row's size counted whole, then the totals
                conn.execute("UPDATE responses SET size = " + size_sql("octet_length({})"))
                conn.execute("DELETE FROM response_owners")
                conn.execute(COUNT_OWNERS)
                for statement in _TRIGGERS:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO toolwire_store (name, version) VALUES ('responses', %s) "
                    "ON CONFLICT (name) DO UPDATE SET version = EXCLUDED.version",
                    (_VERSION,),
                )

    def _chain(self, conn: psycopg.Connection[Any], rid: str, owner: str) -> list[str] | None:
        lim = self.limits
        rows = conn.execute(
            chain_query("%s"),
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
        with self._db() as conn, conn.transaction():
            # one owner's writers take turns, on every gateway: the quota holds
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCKS, kept.owner))
            conn.execute(
                "DELETE FROM responses WHERE owner = %s AND expires <= %s", (kept.owner, now)
            )
            row = conn.execute(
                "SELECT responses, bytes FROM response_owners WHERE owner = %s", (kept.owner,)
            ).fetchone() or (0, 0)
            refused = quota_error(self.limits, int(row[0]), int(row[1]), size)
            if refused is not None:
                raise refused
            conn.execute(
                "INSERT INTO responses (id, owner, model, previous, body, count, size, "
                "created, expires) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
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
                    ids = self._chain(conn, kept.previous, kept.owner) or []
                except HistoryTooLong:
                    ids = []
                if ids:
                    conn.execute(
                        "UPDATE responses SET expires = greatest(expires, %s) WHERE id = ANY(%s)",
                        (kept.expires, ids),
                    )
        return kept

    def get(self, rid: str, owner: str) -> StoredResponse | None:
        with self._db() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM responses WHERE id = %s AND owner = %s AND expires > %s",
                (rid, owner, self.clock()),
            ).fetchone()
        return response_of(row) if row else None

    def history(self, rid: str, owner: str) -> list[StoredResponse] | None:
        with self._db() as conn:
            ids = self._chain(conn, rid, owner)
            if ids is None:
                return None
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM responses WHERE id = ANY(%s)", (ids,)
            ).fetchall()
        found = {row[0]: response_of(row) for row in rows}
        if len(found) != len(ids):
            return None  # forgotten between the walk and the read
        return [found[i] for i in reversed(ids)]

    def delete(self, rid: str, owner: str) -> bool:
        with self._db() as conn:
            gone = conn.execute(
                "DELETE FROM responses WHERE id = %s AND owner = %s AND expires > %s",
                (rid, owner, self.clock()),
            ).rowcount
        return bool(gone)

    def usage(self, owner: str) -> StoreUsage:
        with self._db() as conn:
            row = conn.execute(
                USAGE_QUERY.format(p="%s"), (owner, owner, owner, self.clock())
            ).fetchone()
        assert row is not None
        return StoreUsage(int(row[0]), int(row[1]))

    def purge(self) -> int:
        with self._db() as conn:
            return int(
                conn.execute("DELETE FROM responses WHERE expires <= %s", (self.clock(),)).rowcount
            )

    def close(self) -> None:
        """Close the pool's connections (a later use opens a new pool)."""
        with self._opening:
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            pool.close()
