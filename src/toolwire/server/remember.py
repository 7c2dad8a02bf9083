"""Responses that continue: ``previous_response_id``, ``store``, and a stored response's
``GET`` and ``DELETE``, served from the gateway's own store for the key that made them.

The store is :mod:`toolwire.store.responses` — the gateway's, never the CLI's
conversations. A response is stored as what it added: the previous response's pending calls
(put back first), its own input beyond the history it continued, and its output, with the
id of the response it continued; a continuation reads the chain back. ``instructions`` are
not kept: as in OpenAI's API, a continuation gives its own. The calls a response ends with
wait for their results (``pending``) and are put back in place when it is continued.

Every response belongs to the key that made it (:mod:`toolwire.server.keys`): another key's
response is not found, with the same status and message as an id that never existed. What
the store cannot do is told to clients in words that name nothing of the host (its file,
its server); the operator's log has the cause.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import StoreError
from ..store.responses import (
    HistoryTooLong,
    QuotaExceeded,
    ResponseStore,
    StoredResponse,
)
from .validate import RequestError

__all__ = ["UNAVAILABLE", "ResponseMemory", "not_found", "not_kept"]

_log = logging.getLogger(__name__)

#: What a client is told when the store cannot be used (the cause goes to the log).
UNAVAILABLE = "the response store is unavailable; try again later, or send store: false"


def not_found(rid: str, param: str | None = None) -> RequestError:
    """The one answer for an id that is not the asker's: never made, expired, deleted or
    another key's alike."""
    return RequestError(f"no stored response has the id {rid[:80]!r}", param, 404)


def _unavailable(exc: StoreError) -> RequestError:
    _log.error("the response store failed (%s): %s", exc.kind, exc)
    return RequestError(UNAVAILABLE, status=503)


def _split(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Whole steps, and the calls at the end that wait for their results."""
    cut = len(messages)
    while (
        cut and messages[cut - 1].get("role") == "assistant" and messages[cut - 1].get("tool_calls")
    ):
        cut -= 1
    return messages[:cut], messages[cut:]


class ResponseMemory:
    """One request's view of the store (a :class:`~toolwire.store.responses.ResponseStore`),
    as the key ``owner``: the history it continues (and
    so where its own messages begin), and where its response is kept."""

    def __init__(self, store: ResponseStore, owner: str) -> None:
        self.store = store
        self.owner = owner
        #: The response this request continues, and how many messages of its history are
        #: stored already (its pending calls are not: the continuation stores them).
        self.previous: str | None = None
        self.carried = 0

    async def _run(self, work: Any, *args: Any) -> Any:
        try:
            return await asyncio.to_thread(work, *args)
        except StoreError as exc:
            raise _unavailable(exc) from None

    async def history(self, previous: str) -> list[dict[str, Any]]:
        """The conversation ``previous`` ended (its output included, its pending calls
        last); a 404 when the key has no such response, a 400 when it is too long."""
        try:
            chain = await self._run(self.store.history, previous, self.owner)
        except HistoryTooLong as exc:
            raise RequestError(
                f"previous_response_id: {exc}; start a new response, giving the input you "
                "need whole (or a summary of it)",
                "previous_response_id",
            ) from None
        if chain is None:
            raise not_found(previous, "previous_response_id")
        messages = [dict(m) for r in chain for m in r.messages]
        self.previous, self.carried = previous, len(messages)
        return messages + [dict(m) for m in chain[-1].pending]

    async def admit(self) -> None:
        """Refuse, before the model runs, a request whose key keeps all its quota allows. A
        store that cannot be read refuses nothing here: the reply goes, and says with the
        ``response-not-stored`` notice that it was not kept."""
        try:
            usage = await asyncio.to_thread(self.store.usage, self.owner)
        except StoreError as exc:
            _log.warning("the response store cannot be read: %s", exc)
            return
        limits = self.store.limits
        if usage.responses >= limits.key_responses or usage.bytes >= limits.key_bytes:
            raise RequestError(
                "this key's stored responses fill its quota: delete some or send store: false",
                "store",
            )

    def _keep(self, rid: str, model: str, messages: Sequence[Mapping[str, Any]]) -> None:
        added, pending = _split([dict(m) for m in messages[self.carried :]])
        kept = StoredResponse(
            id=rid,
            owner=self.owner,
            model=model,
            previous=self.previous,
            messages=added,
            pending=pending,
        )
        self.store.put(kept)

    async def keep(self, rid: str, model: str, messages: Sequence[Mapping[str, Any]]) -> None:
        """Store the response ``rid``, whose whole conversation (the history it continued,
        its input and its output) is ``messages``: only what it added is written. Raises
        :class:`StoreError` or :class:`QuotaExceeded` (the reply stands: a notice says so)."""
        await asyncio.to_thread(self._keep, rid, model, messages)

    async def get(self, rid: str) -> StoredResponse:
        """The key's response ``rid``; a 404 when it has none."""
        found = await self._run(self.store.get, rid, self.owner)
        if found is None:
            raise not_found(rid)
        assert isinstance(found, StoredResponse)
        return found

    async def delete(self, rid: str) -> None:
        """Forget the key's response ``rid``; a 404 when it has none."""
        if not await self._run(self.store.delete, rid, self.owner):
            raise not_found(rid)


def not_kept(exc: Exception) -> str:
    """Why a response was not stored, as its notice tells the client (nothing of the host)."""
    if isinstance(exc, QuotaExceeded):
        return f"the response was not stored: {exc}"
    if isinstance(exc, StoreError):
        _log.error("a response could not be stored (%s): %s", exc.kind, exc)
    return f"the response was not stored: {UNAVAILABLE}"
