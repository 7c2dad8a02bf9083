"""Backends: each model behind one interface, yielding the same events."""

from .base import Backend, Request, stream_sync
from .openai import PROVIDERS, OpenAIBackend

__all__ = ["PROVIDERS", "Backend", "OpenAIBackend", "Request", "stream_sync"]
