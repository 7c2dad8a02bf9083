"""Responses that continue: ``previous_response_id`` and ``store`` served from the
conversation store.

A stored response is a stored conversation named by the response's id: the whole
conversation up to and including the response's own output, so any response can be
continued (twice, too: each continuation is a conversation of its own). ``instructions`` are
not kept: as in OpenAI's API, a continuation gives its own. The store keeps only whole steps
(a call with its results); the calls a response ends with wait for their results in the
conversation's session values, and are put back in place when it is continued.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ToolwireError, UsageError
from ..store import ConversationStore
from .validate import RequestError

__all__ = ["ResponseMemory"]

_OPEN = "open_calls"


class ResponseMemory:
    """Stored responses, over a :class:`~toolwire.store.ConversationStore`."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def _history(self, previous: str) -> list[dict[str, Any]]:
        try:
            found = self.store.get(previous)
        except UsageError:
            raise RequestError(
                f"previous_response_id {previous[:80]!r} names no stored response",
                "previous_response_id",
                404,
            ) from None
        return [dict(m) for m in found.messages] + list(found.session.get(_OPEN, []))

    async def history(self, previous: str) -> list[dict[str, Any]]:
        """The conversation a response ended (its output included); a 404 when none."""
        try:
            return await asyncio.to_thread(self._history, previous)
        except ToolwireError as exc:
            if isinstance(exc, UsageError):
                raise
            raise RequestError(f"the response store cannot be read: {exc}", status=503) from None

    def _keep(self, rid: str, model: str, messages: Sequence[Mapping[str, Any]]) -> None:
        conversation = self.store.open(rid, model=model)
        whole = [dict(m) for m in messages]
        # the calls at the end wait for their results: not a whole step yet
        cut = len(whole)
        while (
            cut and whole[cut - 1].get("role") == "assistant" and whole[cut - 1].get("tool_calls")
        ):
            cut -= 1
        conversation.messages = whole[:cut]
        conversation.session = {_OPEN: whole[cut:]}
        self.store.save(conversation)

    async def keep(self, rid: str, model: str, messages: Sequence[Mapping[str, Any]]) -> None:
        """Store the response ``rid``: the conversation up to and including its output."""
        await asyncio.to_thread(self._keep, rid, model, messages)
