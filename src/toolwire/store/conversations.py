"""Conversations that persist: :class:`ConversationStore` and :class:`StoredConversation`.

A stored conversation keeps its messages (calls and results included), its settings, its
session's values, its model and when it was made and last written. It is written a *step* at
a time: an assistant message with the results of every call it made, or an answer. The loop
calls :meth:`~toolwire.conversation.Conversation.commit` whenever the conversation is whole
like that — before each next request, and when the reply ends — so a process killed mid-turn
loses only the step in flight, and the store never holds a call without its results.

Settings: a conversation keeps the settings it was made with (the flags and environment of
its first run, resolved), so a format chosen once stays its format. Giving a setting again
later (``toolwire chat --conversation c1 --tool-format json``) changes it for that run only,
and the conversation keeps its own: a flag never rewrites a stored setting behind the user's
back.

Two processes writing one conversation take turns: each step is one ``BEGIN IMMEDIATE``
transaction, so its messages land together, in order, after whatever is there; a step of
one process may come between two steps of the other's reply, never inside one.
"""

from __future__ import annotations

import datetime
import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..conversation import Conversation, resolve_settings
from ..errors import StoreError, UsageError
from .db import connect, default_path, transaction

__all__ = ["ConversationStore", "StoredConversation"]

_MAX_NAME = 200


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > _MAX_NAME:
        raise UsageError(f"a conversation's name is 1 to {_MAX_NAME} characters, not {name!r}")
    if any(ord(c) < 32 or c == "\x7f" for c in name):
        raise UsageError(f"a conversation's name has no control characters: {name!r}")
    return name


def _dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(value)  # ASCII: a lone surrogate a model sent stays storable
    except (TypeError, ValueError) as exc:
        raise UsageError(f"the conversation's {what} cannot be stored as JSON: {exc}") from None


def _whole(messages: list[dict[str, Any]], start: int) -> int:
    """The end of the longest run from ``start`` in which every call has its result."""
    pending: set[str] = set()
    end = start
    for i in range(start, len(messages)):
        message = messages[i]
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or ():
                if isinstance(call, Mapping):
                    pending.add(str(call.get("id")))
        elif message.get("role") == "tool":
            pending.discard(str(message.get("tool_call_id")))
        if not pending:
            end = i + 1
    return end


@dataclass
class StoredConversation(Conversation):
    """A :class:`~toolwire.conversation.Conversation` that lives in a store under ``name``;
    :meth:`commit` writes the messages it gained since (the whole steps among them)."""

    name: str = ""
    model: str | None = None
    created: str = ""
    updated: str = ""
    store: ConversationStore | None = field(default=None, repr=False, compare=False)
    #: How many of ``messages`` are in the store.
    saved: int = field(default=0, repr=False, compare=False)

    def commit(self) -> None:
        if self.store is not None:
            self.store.save(self)

    def to_json(self) -> dict[str, Any]:
        """The conversation as one JSON object, every message in it."""
        return {
            "name": self.name,
            "id": self.id,
            "model": self.model,
            "settings": dict(self.settings),
            "session": dict(self.session),
            "created": self.created,
            "updated": self.updated,
            "messages": [dict(m) for m in self.messages],
        }


class ConversationStore:
    """Named conversations and what the pipeline learned about models, in one file.

    ``path`` defaults to ``toolwire.db`` under ``$TOOLWIRE_HOME``; ``timeout`` is how long a
    write waits for another process's to finish. Each call opens the file and closes it
    again, so a store object may be shared between threads and outlive a crash.
    """

    def __init__(self, path: str | Path | None = None, *, timeout: float = 30.0) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.timeout = timeout

    def _connect(self) -> Any:
        return connect(self.path, timeout=self.timeout)

    # -- conversations

    def summaries(self) -> list[dict[str, Any]]:
        """Every conversation's name, model, message count and times, latest first."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT c.name, c.model, COUNT(m.seq), c.created, c.updated FROM conversations c "
                "LEFT JOIN messages m ON m.conversation = c.id GROUP BY c.id "
                "ORDER BY c.updated DESC, c.name"
            ).fetchall()
        keys = ("name", "model", "messages", "created", "updated")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def exists(self, name: str) -> bool:
        with self._connect() as db:
            row = db.execute(
                "SELECT 1 FROM conversations WHERE name = ?", (_check_name(name),)
            ).fetchone()
        return row is not None

    def get(self, name: str) -> StoredConversation:
        """The conversation ``name``; a :class:`~toolwire.errors.UsageError` when none."""
        with self._connect() as db:
            found = self._read(db, _check_name(name))
        if found is None:
            raise UsageError(f"there is no conversation named {name!r} in {self.path}")
        return found

    def open(
        self,
        name: str,
        *,
        settings: Mapping[str, Any] | None = None,
        model: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> StoredConversation:
        """The conversation ``name``, resumed; or made now, keeping ``settings`` resolved
        (with the environment) as its own. On resume ``settings`` are not stored: pass them
        to the loop to override the conversation's for one run."""
        _check_name(name)
        with self._connect() as db, transaction(db):
            found = self._read(db, name)
            if found is None:
                pinned = resolve_settings(settings, environ=environ)
                now = _now()
                fresh = Conversation()
                db.execute(
                    "INSERT INTO conversations (name, uid, model, settings, session, "
                    "created, updated) VALUES (?, ?, ?, ?, '{}', ?, ?)",
                    (name, fresh.id, model, _dumps(pinned, "settings"), now, now),
                )
                found = self._read(db, name)
        assert found is not None
        return found

    def save(self, conversation: StoredConversation) -> int:
        """Write the messages the conversation gained since it was read or last saved, up to
        the last one with every call answered, in one transaction, with its settings, session
        and model; returns how many were written."""
        start = conversation.saved
        end = _whole(conversation.messages, start)
        bodies = [_dumps(m, "messages") for m in conversation.messages[start:end]]
        settings = _dumps(conversation.settings, "settings")
        session = _dumps(conversation.session, "session values")
        now = _now()
        with self._connect() as db, transaction(db):
            row = db.execute(
                "SELECT id FROM conversations WHERE name = ? AND uid = ?",
                (conversation.name, conversation.id),
            ).fetchone()
            if row is None:
                raise StoreError(
                    f"the conversation {conversation.name!r} was deleted (or replaced) "
                    "by another process; its latest messages were not stored",
                    kind="gone",
                )
            (last,) = db.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE conversation = ?", row
            ).fetchone()
            db.executemany(
                "INSERT INTO messages (conversation, seq, body) VALUES (?, ?, ?)",
                [(row[0], last + 1 + i, body) for i, body in enumerate(bodies)],
            )
            db.execute(
                "UPDATE conversations SET model = COALESCE(?, model), settings = ?, "
                "session = ?, updated = ? WHERE id = ?",
                (conversation.model, settings, session, now, row[0]),
            )
        conversation.saved = end
        conversation.updated = now
        return len(bodies)

    def delete(self, name: str) -> None:
        """Delete the conversation ``name`` and its messages (a UsageError when none)."""
        with self._connect() as db, transaction(db):
            row = db.execute(
                "SELECT id FROM conversations WHERE name = ?", (_check_name(name),)
            ).fetchone()
            if row is not None:
                db.execute("DELETE FROM messages WHERE conversation = ?", row)
                db.execute("DELETE FROM conversations WHERE id = ?", row)
        if row is None:
            raise UsageError(f"there is no conversation named {name!r} in {self.path}")

    def _read(self, db: sqlite3.Connection, name: str) -> StoredConversation | None:
        row = db.execute(
            "SELECT id, uid, model, settings, session, created, updated FROM conversations "
            "WHERE name = ?",
            (name,),
        ).fetchone()
        if row is None:
            return None
        key, uid, model, settings, session, created, updated = row
        bodies = db.execute(
            "SELECT body FROM messages WHERE conversation = ? ORDER BY seq", (key,)
        ).fetchall()
        try:
            messages = [json.loads(b) for (b,) in bodies]
            loaded_settings, loaded_session = json.loads(settings), json.loads(session)
        except ValueError as exc:
            raise StoreError(
                f"the conversation {name!r} in {self.path} is damaged: {exc}", kind="corrupt"
            ) from None
        return StoredConversation(
            messages=messages,
            settings=loaded_settings,
            session=loaded_session,
            id=uid,
            name=name,
            model=model,
            created=created,
            updated=updated,
            store=self,
            saved=len(messages),
        )

    # -- what the pipeline learned about models (see toolwire.pipeline.memory)

    def load_lessons(self) -> list[dict[str, Any]]:
        """The lessons kept, least recently taught first, each with its source and end."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT endpoint, model, dialect, words, source, until, code FROM lessons "
                "ORDER BY used, rowid"
            ).fetchall()
        return [
            {
                "endpoint": e,
                "model": m,
                "dialect": d,
                "words": bool(w),
                "source": s,
                "until": u,
                "code": c,
            }
            for e, m, d, w, s, u, c in rows
        ]

    def save_lesson(self, lesson: Mapping[str, Any], *, keep: int) -> None:
        """Keep one model's lesson (replacing its last) with its source and end, and at most
        ``keep`` lessons."""
        with self._connect() as db, transaction(db):
            db.execute(
                "INSERT OR REPLACE INTO lessons "
                "(endpoint, model, dialect, words, used, source, until, code) "
                "VALUES (?, ?, ?, ?, julianday('now'), ?, ?, ?)",
                (
                    lesson["endpoint"],
                    lesson["model"],
                    lesson["dialect"],
                    lesson["words"],
                    lesson.get("source") or "given",
                    lesson.get("until"),
                    lesson.get("code"),
                ),
            )
            db.execute(
                "DELETE FROM lessons WHERE rowid NOT IN "
                "(SELECT rowid FROM lessons ORDER BY used DESC, rowid DESC LIMIT ?)",
                (keep,),
            )

    def forget_lessons(self, endpoint: str | None = None, model: str | None = None) -> None:
        """Forget one model's lesson, or with no arguments every lesson."""
        with self._connect() as db:
            if endpoint is None:
                db.execute("DELETE FROM lessons")
            else:
                db.execute(
                    "DELETE FROM lessons WHERE endpoint = ? AND model = ?", (endpoint, model)
                )
