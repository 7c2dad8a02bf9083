"""The gateway's stored responses: what ``previous_response_id`` continues, for whom, how long.

A stored response is its *new* messages — the input it added to the conversation and its
output — and a pointer to the response it continued, never the whole conversation again: a
chain of continuations costs what it adds. The calls a response ends with wait for their
results (``pending``); a continuation puts them back in place before its own input.

Every response belongs to the key that made it (its ``owner``, the key's name; ``""`` when
the gateway has no keys): a response of another owner is not found, exactly as one that
never existed, so ids cannot be probed. Ids are unguessable (:func:`new_response_id`).
What is kept is bounded by :class:`StoreLimits`: each response lives ``ttl`` seconds from
its last continuation; a continuation's whole history has at most ``history_bytes`` and
``history_messages`` (past them: :class:`HistoryTooLong`); each owner keeps at most
``key_bytes`` and ``key_responses`` (past them: :class:`QuotaExceeded`), checked in the same
transaction as the write, so concurrent writers cannot pass the quota together. The bytes
counted are every byte a response is stored with (its model's name and ids too, which a
client chooses as much as its messages), and each owner's totals are kept as they change,
so a write reads them, never counts the owner's responses.

This module is the contract; :mod:`toolwire.store.responses_sqlite` (a file of its own
beside the CLI's conversations) keeps it, and :mod:`toolwire.store.responses_pg`, for
gateways that share one PostgreSQL database, keeps it too.
:func:`toolwire.store.opening.open_response_store` picks one by URL.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import UsageError

__all__ = [
    "HistoryTooLong",
    "QuotaExceeded",
    "ResponseStore",
    "StoreLimits",
    "StoreUsage",
    "StoredResponse",
    "new_response_id",
]

#: The file the gateway keeps its responses in, in :func:`toolwire.store.home`: apart from the
#: CLI's conversations (``toolwire.db``), which no client of the gateway can reach.
GATEWAY_FILE = "gateway.db"


def new_response_id() -> str:
    """An id no one can guess: 192 random bits."""
    return "resp_" + secrets.token_hex(24)


@dataclass(frozen=True)
class StoreLimits:
    """What the store keeps, at most (every figure above 0)."""

    #: Seconds a response is kept after it was made or last continued.
    ttl: float = 30 * 24 * 3600.0
    #: Bytes (of stored JSON) of a continuation's whole history, its own input excluded.
    history_bytes: int = 8 * 1024 * 1024
    #: Messages of a continuation's whole history.
    history_messages: int = 10_000
    #: Bytes all of one owner's live responses take (every byte of each, as ``size`` says).
    key_bytes: int = 256 * 1024 * 1024
    #: How many live responses one owner has.
    key_responses: int = 100_000

    def __post_init__(self) -> None:
        for name in ("ttl", "history_bytes", "history_messages", "key_bytes", "key_responses"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise UsageError(f"the store's {name} must be a number above 0, not {value!r}")


@dataclass(frozen=True)
class StoredResponse:
    """One response as stored: its own messages and the one it continued."""

    id: str
    owner: str
    model: str
    #: The response it continued (``previous_response_id``), or None.
    previous: str | None
    #: The messages it added: its input (the previous one's pending calls first) and its
    #: output, as whole steps (each call with its results).
    messages: list[dict[str, Any]] = field(default_factory=list)
    #: The calls it ended with, waiting for their results.
    pending: list[dict[str, Any]] = field(default_factory=list)
    #: Unix seconds, set by the store when it keeps the response.
    created: float = 0.0
    expires: float = 0.0
    #: Bytes its row holds — its JSON, its ids, its model's name, its numbers — set by the
    #: store: what its owner's quota counts.
    size: int = 0


@dataclass(frozen=True)
class StoreUsage:
    """What one owner keeps now."""

    responses: int
    bytes: int


class HistoryTooLong(UsageError):
    """A continuation's history is past the store's limits: the client starts afresh (or
    sends the history itself). ``what`` is ``"bytes"`` or ``"messages"``."""

    def __init__(self, message: str, what: str) -> None:
        super().__init__(message)
        self.what = what


class QuotaExceeded(UsageError):
    """The owner keeps as much as its quota allows; the response was not stored.
    ``what`` is ``"bytes"`` or ``"responses"``."""

    def __init__(self, message: str, what: str) -> None:
        super().__init__(message)
        self.what = what


class ResponseStore(Protocol):
    """Where the gateway keeps responses. Every method is blocking (call it off the event
    loop) and raises :class:`~toolwire.errors.StoreError` when the store cannot be used; its
    message never names a file, host or password (it may reach an operator's log, never a
    client)."""

    limits: StoreLimits

    def put(self, response: StoredResponse) -> StoredResponse:
        """Keep ``response`` (its ``created``/``expires``/``size`` set here, and returned),
        and keep every response its history holds alive as long as it; raises
        :class:`QuotaExceeded` when its owner would pass a quota (nothing is written then)."""

    def get(self, rid: str, owner: str) -> StoredResponse | None:
        """The response ``rid`` of ``owner``; None when there is none, it expired or it is
        another owner's."""

    def history(self, rid: str, owner: str) -> list[StoredResponse] | None:
        """The chain ending with ``rid``, oldest first; None like :meth:`get` (or when a
        response of the chain is gone); raises :class:`HistoryTooLong` past the limits,
        having read no more than the limits allow."""

    def delete(self, rid: str, owner: str) -> bool:
        """Forget the response ``rid`` of ``owner``; False when there was none to forget."""

    def usage(self, owner: str) -> StoreUsage:
        """What ``owner`` keeps now (expired responses not counted)."""

    def purge(self) -> int:
        """Forget every expired response; how many were forgotten."""

    def close(self) -> None:
        """Let go of connections."""
