"""One way to make a backend, for every command and for the gateway's config.

A :class:`BackendSpec` says which model, and how it is reached: in-process (a GGUF file run
by llama-cpp-python), at an OpenAI-compatible server, or through Ollama's native API.
:func:`build_backend` makes the backend a spec names. ``toolwire chat``, ``toolwire serve``
(its flags and each ``[[models]]`` entry of a config) and ``toolwire bench`` all go through
here, so a way of reaching a model that one of them has, the others have too, with the same
checks and the same defaults.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..errors import UsageError
from ..pipeline import ModelMemory, Transport
from .http import DEFAULT_CONNECT_TIMEOUT, HttpTransport, new_client
from .ollama import OllamaBackend
from .openai import OpenAIBackend

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_OLLAMA_URL",
    "KINDS",
    "LOCAL_CTX",
    "BackendSpec",
    "Kind",
    "build_backend",
    "check_tool_format",
]

Kind = Literal["local", "openai", "ollama"]
#: The kinds of backend a spec names.
KINDS: tuple[Kind, ...] = ("local", "openai", "ollama")
#: The context ``chat`` and ``bench`` load a local model with (their prompts are small: a
#: larger one would cost memory and load time for nothing). A spec that gives none gets the
#: model's trained context, within memory (:func:`~toolwire.backends.context.agent_context`),
#: which a coding agent's request needs.
LOCAL_CTX = 4096
#: Where Ollama listens unless told otherwise.
DEFAULT_OLLAMA_URL = OllamaBackend.default_base_url


@dataclass(frozen=True)
class BackendSpec:
    """A model and the way to reach it; made from flags or a config entry, built by
    :func:`build_backend`. Checked when made, so that a bad spec is told at start, not at
    the first request."""

    kind: Kind
    #: ``local``: a GGUF file or a known model's name (None: the default local model);
    #: otherwise the model's name at the server (needed to build it; a gateway passing on
    #: the name each client asks for keeps a spec without one).
    model: str | None = None
    #: ``openai``: the server's base URL (None: OpenAI's own); ``ollama``: Ollama's address
    #: (None: :data:`DEFAULT_OLLAMA_URL`).
    base_url: str | None = None
    #: ``openai``: the key itself (a flag's), or the name of the variable that holds it
    #: (a config's: keys stay in the environment there). The key is never shown.
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None
    #: ``local``: the context it is loaded with (None: the model's trained context, within
    #: memory: :func:`~toolwire.backends.context.agent_context`); otherwise the window tools
    #: in words are sized to (None: the backend's default).
    ctx: int | None = None
    #: The tool-call format setting (``auto``, ``none`` or a family's name): a local model's
    #: template family; for a server, the family its model writes its calls in as text (an
    #: engine that leaves them in the content), read as it streams.
    tool_format: str = "auto"
    #: ``openai``: how tool schemas are shown to the provider (None: from its URL).
    dialect: str | None = None
    #: ``openai``: the engine behind the URL, for the fields it documents to constrain a
    #: call or an output (see :mod:`toolwire.backends.engines`; None: from its URL).
    engine: str | None = None
    #: A server whose model takes no tools: they are given in words.
    words: bool = False
    #: A remote backend's deadline for each request and its connect timeout, in seconds
    #: (None: the backend's defaults).
    timeout: float | None = None
    connect_timeout: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UsageError(f"a backend is one of {', '.join(KINDS)}, not {self.kind!r}")
        given = {
            "base_url": self.base_url is not None,
            "words": self.words,
            "api_key": self.api_key is not None or self.api_key_env is not None,
            "dialect": self.dialect is not None,
            "engine": self.engine is not None,
            "tool_format": self.tool_format != "auto",
        }
        takes = {
            "local": {"tool_format"},
            "openai": {"base_url", "words", "api_key", "dialect", "engine", "tool_format"},
            "ollama": {"base_url", "words", "tool_format"},
        }[self.kind]
        refused = sorted(k for k, on in given.items() if on and k not in takes)
        if refused:
            raise UsageError(f"a {self.kind} backend takes no {', '.join(refused)}")
        if self.engine is not None:
            from .engines import engine_for

            engine_for(self.engine, "")  # an unknown engine is told now
        if self.ctx is not None and (type(self.ctx) is not int or self.ctx < 1):
            raise UsageError(f"ctx must be a whole number of tokens, not {self.ctx!r}")
        check_tool_format(self.tool_format, "tool_format")

    def key(self) -> str | None:
        """The key to send: the one given, or the one the named variable holds."""
        if self.api_key is not None:
            return self.api_key
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def where(self) -> str:
        """Where the model is, in words (a bench report's engine, say)."""
        if self.kind == "local":
            return f"llama-cpp-python in-process ({self.model or 'the default model'})"
        if self.kind == "ollama":
            return f"ollama {self.base_url or DEFAULT_OLLAMA_URL}"
        kind = "words via" if self.words else "openai-compatible"
        engine = f" ({self.engine})" if self.engine else ""
        return f"{kind} {self.base_url or OpenAIBackend.default_base_url}{engine}"


def build_backend(
    spec: BackendSpec,
    *,
    memory: ModelMemory | None = None,
    clients: dict[str, httpx.AsyncClient] | None = None,
) -> Transport:
    """The backend ``spec`` names. ``memory`` is what it learns about models in (None: the
    process's default). With ``clients``, a remote backend takes its pooled connections from
    there, one client per server address made on first use and shared by every model served
    from it (the gateway keeps them for as long as it serves); without, it makes its own.

    A local model is loaded now, which takes seconds: the gateway does it on first use, off
    its event loop."""
    if spec.kind == "local":
        from ..models import local_model
        from .context import agent_context
        from .llamacpp import LlamaCppBackend

        path = local_model(spec.model)
        return LlamaCppBackend(
            path,
            n_ctx=spec.ctx or agent_context(path),
            tool_format=spec.tool_format,
            memory=memory,
        )
    if not spec.model:
        raise UsageError(f"an {spec.kind} backend needs the model's name")
    cls: type[HttpTransport] = OllamaBackend if spec.kind == "ollama" else OpenAIBackend
    options: dict[str, Any] = {
        "base_url": spec.base_url,
        "context_tokens": spec.ctx,
        "words": spec.words,
        "memory": memory,
        "timeout": spec.timeout,
        "connect_timeout": spec.connect_timeout,
        "tool_format": None if spec.tool_format == "auto" else spec.tool_format,
    }
    if clients is not None:
        options["client"] = _pooled(cls, spec, clients)
    if spec.kind == "ollama":
        return OllamaBackend(spec.model, **options)
    return OpenAIBackend(
        spec.model, api_key=spec.key(), dialect=spec.dialect, engine=spec.engine, **options
    )


def check_tool_format(value: str, setting: str) -> str:
    """``value`` when it is a ``tool_format`` setting (``auto``, ``none`` or a family's
    name), else a :class:`UsageError` naming ``setting`` (a flag, a config's key): told when
    a command starts, not by each request."""
    if value in ("auto", "none"):
        return value
    from ..formats.registry import FORMAT_SETTINGS, family_names

    known = [*FORMAT_SETTINGS, *family_names()]
    if value not in known:
        raise UsageError(f"{setting} {value!r} is not a tool format; known: {', '.join(known)}")
    return value


def _pooled(
    cls: type[HttpTransport], spec: BackendSpec, clients: dict[str, httpx.AsyncClient]
) -> httpx.AsyncClient:
    """The pooled client of the server ``spec`` names, made the first time it is asked for
    with the spec's timeouts (or the backend's defaults)."""
    address = (spec.base_url or cls.default_base_url).rstrip("/")
    if address not in clients:
        timeout = spec.timeout if spec.timeout is not None else cls.default_timeout
        connect = spec.connect_timeout
        clients[address] = new_client(
            timeout, connect_timeout=connect if connect is not None else DEFAULT_CONNECT_TIMEOUT
        )
    return clients[address]
