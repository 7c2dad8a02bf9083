"""The store's file: where it lives, its schema, its versioned migrations, safe opening.

One SQLite file (the standard library's ``sqlite3``) in write-ahead-log mode, under
``$TOOLWIRE_HOME`` (default ``~/.local/share/toolwire/``). Its schema version is SQLite's
``PRAGMA user_version``; :data:`MIGRATIONS` holds, for each version, the statements that
bring the previous one to it, run in one transaction with the version's bump.

Before SQLite touches a file that exists, its header is read by hand: a file that is not a
SQLite database, or one a newer toolwire made, is refused with a
:class:`~toolwire.errors.StoreError` and left byte for byte as it was (even switching on WAL
would write to it). Every write is a ``BEGIN IMMEDIATE`` transaction: writers take turns, and
a writer waits up to ``timeout`` seconds for its turn rather than failing at once.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreError

__all__ = [
    "FILE_NAME",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "connect",
    "default_path",
    "home",
    "transaction",
]

FILE_NAME = "toolwire.db"

#: Version N's statements bring a store at version N-1 to N (version 0 is an empty file).
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            uid TEXT NOT NULL,
            model TEXT,
            settings TEXT NOT NULL,
            session TEXT NOT NULL,
            created TEXT NOT NULL,
            updated TEXT NOT NULL
        )""",
        """CREATE TABLE messages (
            conversation INTEGER NOT NULL REFERENCES conversations(id),
            seq INTEGER NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (conversation, seq)
        )""",
        """CREATE TABLE lessons (
            endpoint TEXT NOT NULL,
            model TEXT NOT NULL,
            dialect TEXT,
            words INTEGER NOT NULL,
            used REAL NOT NULL,
            PRIMARY KEY (endpoint, model)
        )""",
    ),
    # a lesson says where it came from and when it ends (see toolwire.pipeline.memory); one
    # kept before this was read from a provider's free text, which may quote a client's
    # request, so it is dropped: the model is asked afresh
    2: (
        "DELETE FROM lessons",
        "ALTER TABLE lessons ADD COLUMN source TEXT NOT NULL DEFAULT 'given'",
        "ALTER TABLE lessons ADD COLUMN until REAL",
        "ALTER TABLE lessons ADD COLUMN code TEXT",
    ),
}
SCHEMA_VERSION = max(MIGRATIONS)

_MAGIC = b"SQLite format 3\x00"
_HEADER = 100  # bytes; user_version is the big-endian integer at offset 60


def home() -> Path:
    """toolwire's data directory: ``$TOOLWIRE_HOME``, else ``~/.local/share/toolwire``."""
    given = os.environ.get("TOOLWIRE_HOME")
    return Path(given).expanduser() if given else Path.home() / ".local" / "share" / "toolwire"


def default_path() -> Path:
    """The store's file in :func:`home`."""
    return home() / FILE_NAME


def _check_header(path: Path) -> None:
    """Refuse, without opening it in SQLite, a file that is not a store this version can use."""
    try:
        with path.open("rb") as f:
            header = f.read(_HEADER)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(
            f"cannot read the conversation store {path}: {exc.strerror}", kind="corrupt"
        ) from None
    if not header:
        return  # an empty file is a new store
    if len(header) < _HEADER or not header.startswith(_MAGIC):
        raise StoreError(
            f"{path} is not a conversation store (not an SQLite database); it was left as it "
            "is: move it away or set TOOLWIRE_HOME to use another place",
            kind="corrupt",
        )
    _check_version(path, int.from_bytes(header[60:64], "big"))


def _check_version(path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the conversation store {path} has schema version {version}, made by a newer "
            f"toolwire (this one knows up to {SCHEMA_VERSION}); it was left as it is: "
            "upgrade toolwire to use it",
            kind="newer",
        )


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """A write: ``BEGIN IMMEDIATE`` (waiting for any other writer), committed when the block
    ends, rolled back whole when it raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    with transaction(db):
        version = db.execute("PRAGMA user_version").fetchone()[0]
        _check_version(path, version)  # a newer toolwire may have got here first
        for target in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[target]:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {target:d}")


@contextmanager
def connect(path: Path, *, timeout: float) -> Iterator[sqlite3.Connection]:
    """An open, migrated connection to the store at ``path``, in autocommit mode (callers
    open their own ``BEGIN IMMEDIATE``); SQLite's errors come out as a
    :class:`~toolwire.errors.StoreError` that names the file."""
    _check_header(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot make the directory for the conversation store {path}: {exc.strerror}",
            kind="corrupt",
        ) from None
    db: sqlite3.Connection | None = None
    try:
        db = sqlite3.connect(path, timeout=timeout, isolation_level=None)
        db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000):d}")
        # the header can lag behind a write-ahead log: ask SQLite too, before any write
        version = db.execute("PRAGMA user_version").fetchone()[0]
        _check_version(path, version)
        if version < SCHEMA_VERSION:
            _migrate(db, path)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")  # a committed turn survives a power cut
        yield db
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise StoreError(
                f"the conversation store {path} was busy (another process writing) for more "
                f"than {timeout:g} s",
                kind="busy",
            ) from None
        raise StoreError(
            f"the conversation store {path} cannot be used: {exc}; it was left as it is",
            kind="corrupt",
        ) from None
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"the conversation store {path} is damaged ({exc}); it was left as it is: move it "
            "away or set TOOLWIRE_HOME to use another place",
            kind="corrupt",
        ) from None
    finally:
        if db is not None:
            db.close()
