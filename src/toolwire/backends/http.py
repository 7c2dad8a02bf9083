"""The one HTTP exchange every remote backend makes: POST a body, read a streamed reply.

Failures are mapped here, at the edge: a refusal becomes a :class:`BackendError` carrying
the status and what the provider said (kept so a refusal can be classified and healed), an
unreachable server one that says so.
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

import httpx

from ..errors import BackendError
from ..events import Event

__all__ = ["error_message", "new_client", "post_stream", "ssl_context"]


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One verified TLS context, made as httpx makes its own, for every client made here.

    Loading the certificate bundle costs about 25 ms of CPU, and httpx does it for every
    client it builds, even one that only speaks plain HTTP: paid per request, that blocked
    the event loop long enough to make the gateway twenty times slower than its upstream.
    """
    return httpx.create_ssl_context()


def new_client(timeout: float = 120.0) -> httpx.AsyncClient:
    """A client for a long-lived caller (the gateway, the bench): connections are reused."""
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
    return httpx.AsyncClient(timeout=timeout, verify=ssl_context(), limits=limits)


def error_message(text: str) -> str:
    """The provider's own words from an error body (OpenAI's and Ollama's shapes)."""
    try:
        data = json.loads(text)
    except ValueError:
        return text[:500]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
    return text[:500]


async def post_stream(
    client: httpx.AsyncClient | None,
    url: str,
    body: Mapping[str, Any],
    read: Callable[[httpx.Response], AsyncGenerator[Event, None]],
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 120.0,
) -> AsyncGenerator[Event, None]:
    """POST ``body`` to ``url`` and yield what ``read`` makes of the streamed reply.

    A client made here is closed here; an injected one is the caller's to close.
    """
    own = client is None
    http = client or httpx.AsyncClient(timeout=timeout, verify=ssl_context())
    try:
        async with http.stream("POST", url, json=dict(body), headers=dict(headers or {})) as r:
            if r.status_code >= 400:
                text = (await r.aread()).decode("utf-8", "replace")
                raise BackendError(
                    f"{url} answered {r.status_code}: {error_message(text)}",
                    status=r.status_code,
                    body=text,
                )
            async for event in read(r):
                yield event
    except httpx.HTTPError as exc:
        raise BackendError(f"{url} could not be reached: {exc}") from exc
    finally:
        if own:
            await http.aclose()
