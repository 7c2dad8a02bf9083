"""Conversations that persist, and what the pipeline learned about models, in one SQLite file;
the gateway's stored responses apart (:mod:`toolwire.store.responses`).

See :mod:`toolwire.store.conversations` for what is kept and when, and
:mod:`toolwire.store.db` for the file, its schema versions and how it is opened safely.
"""

from __future__ import annotations

from .conversations import ConversationStore, StoredConversation
from .db import SCHEMA_VERSION, default_path, home
from .opening import open_response_store
from .responses import (
    HistoryTooLong,
    QuotaExceeded,
    ResponseStore,
    StoredResponse,
    StoreLimits,
    StoreUsage,
    new_response_id,
)

__all__ = [
    "SCHEMA_VERSION",
    "ConversationStore",
    "HistoryTooLong",
    "QuotaExceeded",
    "ResponseStore",
    "StoreLimits",
    "StoreUsage",
    "StoredConversation",
    "StoredResponse",
    "default_path",
    "home",
    "new_response_id",
    "open_response_store",
]
