"""The OpenAI-compatible gateway."""

from .app import MAX_BODY_BYTES, create_app

__all__ = ["MAX_BODY_BYTES", "create_app"]
