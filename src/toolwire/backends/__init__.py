"""Backends: the transports that reach each model, behind the one reply pipeline."""

from ..pipeline import Backend, Request, stream_sync
from .ollama import OllamaBackend
from .openai import PROVIDERS, OpenAIBackend

__all__ = ["PROVIDERS", "Backend", "OllamaBackend", "OpenAIBackend", "Request", "stream_sync"]
