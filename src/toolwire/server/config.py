"""Many models behind one address: ``toolwire serve --config models.toml``.

Each ``[[models]]`` entry has a ``name`` (what clients send as ``model``) and one of: an
``upstream`` (an OpenAI-compatible base URL, with ``upstream_model``, ``api_key_env``,
optional ``dialect``, ``engine``, ``words`` and ``tool_format``), an ``ollama`` (Ollama's
address, with ``upstream_model``, optional ``words`` and ``tool_format``), or a ``gguf`` (a
local file or a known model's name, loaded once, on first use, with an optional ``ctx``, by
default its trained context within memory, and an optional ``tool_format``, a family's name
or ``none``, by default ``auto``: detected from its template). A server's ``tool_format``
is the family its model writes calls in as text, when the engine leaves them in the content:
read as the reply streams, its arguments passed on as they come::

    [[models]]
    name = "local"
    gguf = "qwen2.5-coder-0.5b"
    ctx = 16384
    tool_format = "hermes"

    [[models]]
    name = "gpt"
    upstream = "https://api.openai.com/v1"
    upstream_model = "gpt-4.1-mini"
    api_key_env = "OPENAI_API_KEY"

    [[models]]
    name = "qwen3"
    ollama = "http://127.0.0.1:11434"
    upstream_model = "qwen3:0.6b"

Each entry becomes a :class:`~toolwire.backends.factory.BackendSpec`, as the flags of
``serve``, ``chat`` and ``bench`` do, and is checked when the config is read; when the
gateway starts, each ``gguf`` file is read as far as its header (:func:`check_files`) and
each ``api_key_env`` variable must be set (:func:`check_environment`). An ``upstream`` URL
with a query (Azure's ``?api-version=…``) keeps it after the path each request adds.

:class:`Models` is what the gateway asks for a request's backend: by name from a config,
or the one model the flags give (which then takes any name; an upstream without
``--upstream-model`` is asked for the model the client named).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..backends.engines import ENGINES
from ..backends.factory import BackendSpec, Kind, check_tool_format
from ..errors import BackendError, GGUFError, ToolwireError, UsageError
from ..pipeline import Backend
from ..schemas import DIALECTS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover -- Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found]

__all__ = [
    "ModelEntry",
    "Models",
    "UnknownModel",
    "check_environment",
    "check_files",
    "read_config",
]

#: The key that names each kind of entry, and the other keys that kind takes.
_KINDS: dict[str, tuple[Kind, frozenset[str]]] = {
    "gguf": ("local", frozenset({"ctx", "tool_format"})),
    "upstream": (
        "openai",
        frozenset({"upstream_model", "api_key_env", "dialect", "engine", "words", "tool_format"}),
    ),
    "ollama": ("ollama", frozenset({"upstream_model", "words", "tool_format"})),
}
_KEYS = {"name", *_KINDS, *(k for _, keys in _KINDS.values() for k in keys)}
log = logging.getLogger("toolwire.gateway")

#: Names an upstream passed every client's model keeps a backend for (least recently
#: used dropped first), so clients cannot grow the gateway without bound.
PASSED_NAMES = 64
#: The largest config read (a list of models is a few kilobytes), and the deepest nesting of
#: arrays and inline tables in it: tomllib parses nesting by recursion, so a deeper file
#: would end the gateway's start in a RecursionError, not a message.
MAX_CONFIG_BYTES = 1024 * 1024
MAX_NESTING = 32


class UnknownModel(LookupError):
    """A request named a model the gateway does not serve."""


@dataclass(frozen=True)
class ModelEntry:
    """One model the gateway serves: the name clients ask for, and how to reach it (None for
    a backend handed over ready, :meth:`Models.single`)."""

    name: str
    spec: BackendSpec | None = None


def _entry(i: int, given: Any) -> ModelEntry:
    where = f"models[{i}]"
    if not isinstance(given, dict):
        raise UsageError(f"{where} must be a table")
    unknown = sorted(set(given) - _KEYS)
    if unknown:
        raise UsageError(f"{where} has keys a model entry does not take: {', '.join(unknown)}")
    strings = (
        "name",
        "upstream",
        "ollama",
        "upstream_model",
        "api_key_env",
        "dialect",
        "engine",
        "gguf",
        "tool_format",
    )
    for key in strings:
        if key in given and (not isinstance(given[key], str) or not given[key]):
            raise UsageError(f"{where}.{key} must be a non-empty string")
    if "words" in given and not isinstance(given["words"], bool):
        raise UsageError(f"{where}.words must be true or false")
    if "ctx" in given and (type(given["ctx"]) is not int or not 256 <= given["ctx"] <= 10**7):
        raise UsageError(f"{where}.ctx must be a whole number of tokens, at least 256")
    if "tool_format" in given:
        check_tool_format(given["tool_format"], f"{where}.tool_format")
    if "name" not in given:
        raise UsageError(f"{where} needs a name (what clients send as 'model')")
    named = f"{where} ({given['name']})"
    kinds = [k for k in _KINDS if k in given]
    if not kinds:
        raise UsageError(f"{named} needs either upstream, ollama or gguf")
    if len(kinds) > 1:
        raise UsageError(f"{named} gives {' and '.join(kinds)}: one kind of model, not both")
    (key,) = kinds
    kind, takes = _KINDS[key]
    mixed = sorted(set(given) - takes - {"name", key})
    if mixed:
        raise UsageError(
            f"{named} mixes keys of another kind of model with {key}: {', '.join(mixed)}"
        )
    if "dialect" in given and given["dialect"] not in DIALECTS:
        raise UsageError(
            f"{named}.dialect: unknown schema dialect {given['dialect']!r}; "
            f"known: {', '.join(DIALECTS)}"
        )
    if "engine" in given and given["engine"] not in ENGINES:
        raise UsageError(
            f"{named}.engine: unknown engine {given['engine']!r}; known: {', '.join(ENGINES)}"
        )
    if kind != "local" and "upstream_model" not in given:
        raise UsageError(f"{named} needs upstream_model with {key}: the model's name there")
    spec = BackendSpec(
        kind,
        model=given.get("gguf") if kind == "local" else given["upstream_model"],
        base_url=None if kind == "local" else given[key],
        api_key_env=given.get("api_key_env"),
        ctx=given.get("ctx"),
        tool_format=given.get("tool_format", "auto"),
        dialect=given.get("dialect"),
        engine=given.get("engine"),
        words=given.get("words", False),
    )
    return ModelEntry(given["name"], spec)


def read_config(path: str | Path) -> list[ModelEntry]:
    """The models a config file lists; :class:`UsageError` saying what is wrong. Only the
    file is read: whether a ``gguf`` entry's file is a model is :func:`check_files`'s."""
    try:
        with Path(path).open("rb") as file:
            raw = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise UsageError(f"{path} is larger than {MAX_CONFIG_BYTES} bytes; a config is not")
    try:
        text = raw.decode("utf-8")
        depth = nesting(text)
        if depth > MAX_NESTING:
            raise UsageError(
                f"{path} nests arrays or inline tables {depth} deep; at most {MAX_NESTING}"
            )
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"models"})
    if unknown:
        raise UsageError(f"{path}: only [[models]] tables are read, not {', '.join(unknown)}")
    given = data.get("models")
    if not isinstance(given, list) or not given:
        raise UsageError(f"{path} lists no [[models]]")
    entries = [_entry(i, g) for i, g in enumerate(given)]
    names = [e.name for e in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"{path} names a model twice: {', '.join(twice)}")
    return entries


def nesting(text: str) -> int:
    """How deep arrays and inline tables nest in a TOML text, in one pass: brackets and
    braces counted outside strings and comments (a string's ``[`` nests nothing)."""
    depth = deepest = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth = max(depth - 1, 0)
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "\"'":
            i = _string_end(text, i)
            continue
        i += 1
    return deepest


def _string_end(text: str, i: int) -> int:
    """Where the TOML string that starts at ``i`` ends (past its closing quote; the text's
    end when it does not close, which tomllib then tells)."""
    quote = text[i]
    triple = text.startswith(quote * 3, i)
    close = quote * 3 if triple else quote
    j = i + len(close)
    n = len(text)
    while j < n:
        c = text[j]
        if c == "\\" and quote == '"':
            j += 2
            continue
        if not triple and c == "\n":
            return j
        if text.startswith(close, j):
            j += len(close)
            while triple and j < n and text[j] == quote:  # """a"""" ends with a quote
                j += 1
            return j
        j += 1
    return n


def check_environment(entries: list[ModelEntry], environ: Mapping[str, str]) -> None:
    """Each ``api_key_env`` entry's variable, set (and not empty) in ``environ``: a gateway
    that would send its upstream no key is a :class:`UsageError` naming the entry and the
    variable when it starts, not a 401 from the upstream on each client's request."""
    for i, entry in enumerate(entries):
        variable = entry.spec.api_key_env if entry.spec is not None else None
        if variable and not environ.get(variable):
            raise UsageError(
                f"models[{i}] ({entry.name}).api_key_env: the variable {variable} is not set "
                "(or empty) in the gateway's environment; set it to the upstream's key"
            )


def check_files(entries: list[ModelEntry]) -> None:
    """Each ``gguf`` entry's file, read as far as its header and metadata (not its weights):
    a missing file or one that is not a GGUF model is a :class:`UsageError` naming the
    entry, when the gateway starts rather than on a client's request."""
    from ..models import resolve_model
    from ..templates.gguf import read_gguf

    for i, entry in enumerate(entries):
        spec = entry.spec
        if spec is None or spec.kind != "local" or not spec.model:
            continue
        named = f"models[{i}] ({entry.name}).gguf"
        try:
            path = resolve_model(spec.model)
        except ToolwireError as exc:
            raise UsageError(f"{named}: {exc}") from None
        try:
            read_gguf(path)
        except GGUFError as exc:
            raise UsageError(f"{named}: {exc}") from None


class Models:
    """The backends behind the gateway, by the name a request gives.

    ``build`` makes a backend for an entry (a local model is loaded on first use, in a
    thread, once). ``passed`` is an entry whose ``upstream_model`` is left to the client:
    any name is served by it (an upstream without ``--upstream-model``). With one entry
    and ``any_name``, every name is that model (today's single-model flags).
    """

    def __init__(
        self,
        entries: list[ModelEntry],
        build: Callable[[ModelEntry], Backend],
        *,
        any_name: bool = False,
        passed: ModelEntry | None = None,
    ) -> None:
        self.entries: Mapping[str, ModelEntry] = {e.name: e for e in entries}
        self._build = build
        self._any = any_name
        self._passed = passed
        self._ready: dict[str, Backend] = {}
        self._by_client: OrderedDict[str, Backend] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    @classmethod
    def single(cls, backend: Backend, name: str) -> Models:
        """One ready backend that answers to every name."""
        models = cls([ModelEntry(name)], lambda _: backend, any_name=True)
        models._ready[name] = backend
        return models

    def names(self) -> list[str]:
        return list(self.entries)

    def served_name(self, asked: str | None) -> str:
        """The name a reply gives for a request that asked for ``asked``."""
        if asked and (asked in self.entries or self._passed is not None):
            return asked
        if self.entries and (self._any or not asked):
            return next(iter(self.entries))
        raise UnknownModel(asked or "")

    async def backend(self, asked: str | None) -> Backend:
        """The backend for a request's ``model``; :class:`UnknownModel` when none serves it."""
        if self._passed is not None and asked and asked not in self.entries:
            return self._client_named(asked)
        name = self.served_name(asked)
        ready = self._ready.get(name)
        if ready is not None:
            return ready
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            if name not in self._ready:
                entry = self.entries[name]
                local = entry.spec is not None and entry.spec.kind == "local"
                if local:  # loading takes seconds: not on the event loop
                    self._ready[name] = await asyncio.to_thread(self._loaded, entry)
                else:
                    self._ready[name] = self._build(entry)
        return self._ready[name]

    def _loaded(self, entry: ModelEntry) -> Backend:
        """A local model, loaded; one the engine cannot load is a :class:`BackendError`
        naming the entry, not its file (the client is not told the host's paths: the log
        is), and the next request tries again (the file may be put right meanwhile)."""
        try:
            return self._build(entry)
        except Exception as exc:  # llama.cpp's own errors are ValueError, RuntimeError…
            log.warning("the model %r could not be loaded: %s", entry.name, exc)
            raise BackendError(
                f"the model {entry.name!r} could not be loaded; the gateway's log says why",
                kind="unloadable",
            ) from None

    def _client_named(self, asked: str) -> Backend:
        ready = self._by_client.get(asked)
        if ready is None:
            assert self._passed is not None and self._passed.spec is not None
            entry = ModelEntry(asked, replace(self._passed.spec, model=asked))
            ready = self._by_client[asked] = self._build(entry)
            if len(self._by_client) > PASSED_NAMES:
                self._by_client.popitem(last=False)
        self._by_client.move_to_end(asked)
        return ready
