"""The OpenAI-compatible gateway."""

from .app import BODY_TIMEOUT, MAX_BODY_BYTES, create_app
from .guard import uvicorn_settings
from .heap import freeze_heap
from .validate import RequestError, validate_chat_request

__all__ = [
    "BODY_TIMEOUT",
    "MAX_BODY_BYTES",
    "RequestError",
    "create_app",
    "freeze_heap",
    "uvicorn_settings",
    "validate_chat_request",
]
