"""Backends: each model behind one interface, yielding the same events."""

from .base import Backend, Request, stream_sync
from .ollama import OllamaBackend
from .openai import PROVIDERS, OpenAIBackend

__all__ = ["PROVIDERS", "Backend", "OllamaBackend", "OpenAIBackend", "Request", "stream_sync"]
