"""Conversations that persist, and what the pipeline learned about models, in one SQLite file.

See :mod:`toolwire.store.conversations` for what is kept and when, and
:mod:`toolwire.store.db` for the file, its schema versions and how it is opened safely.
"""

from __future__ import annotations

from .conversations import ConversationStore, StoredConversation
from .db import SCHEMA_VERSION, default_path, home

__all__ = ["SCHEMA_VERSION", "ConversationStore", "StoredConversation", "default_path", "home"]
