"""OpenAI-compatible chat completions over HTTP, streamed.

One client for OpenAI, vLLM, llama-server, LM Studio, Ollama's ``/v1`` and the Gemini and
Anthropic compatibility endpoints. A transport: it sends and reads; the reply pipeline
decides the rest (tools in words, recovery, healing). Tools go in the request; streamed
``tool_calls`` deltas are assembled by index (id and name first, then argument fragments,
several calls at once; an index used again by a call with another id or name is another
call, with a ``calls-kept-apart`` notice; ``tool_calls`` sent as one object is read as one
call, with a ``recovered-tool-calls-object`` notice); a server that ignores ``stream`` and
answers with one JSON completion is read whole (see :class:`~toolwire.backends.http.Records`);
``content`` may be null; ``reasoning`` / ``reasoning_content`` become reasoning and are never
read for calls. Built on ``httpx`` with an injectable client, so tests (and callers with
their own proxies, retries or transports) hand in the client they want.

The engine behind the URL (``engine``: ``openai``, ``vllm``, ``llama-server`` or
``generic``) says which fields constrain a required call or a structured output: only
those it documents are sent (:mod:`toolwire.backends.engines`), in
:func:`_constraint_fields`; an engine that can constrain a call says so (``can_constrain``).

A streamed request asks for the usage (``stream_options``, every engine: see
:mod:`toolwire.backends.engines`), read from the chunk that carries it (with empty
``choices``) into :class:`~toolwire.events.Done`'s usage, the prompt's cached tokens
(``prompt_tokens_details.cached_tokens``) as ``cached_tokens``. A server that refuses the
field is sent the request again without it, with a ``healed-stream-usage`` notice. That heals
the one request; the backend stops asking for the usage (``stream_usage`` False) only when
the refusal is sure — its status and a machine field name ``stream_options`` (OpenAI's
``unsupported_parameter`` code with that ``param``, a pydantic 422 ``extra_forbidden`` at
``["body", "stream_options"]``: :func:`~toolwire.schemas.refusals.refuses_field`), never from
the error's words, which may quote a client's request — and then for the memory's ``ttl``
(an hour by default, on the memory's clock), after which it asks again.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .. import events as ev
from ..errors import BackendError, UsageError
from ..events import Event
from ..messages import ToolCall
from ..pipeline import Plan, Prepared, Request
from ..schemas.refusals import refuses_field
from .engines import (
    CONSTRAINING,
    STREAM_USAGE,
    THINKING,
    Body,
    calls_from_content,
    constraint_fields,
    engine_for,
    refuses_stream_options,
    thinking_fields,
)
from .http import HttpTransport, Records, Reply, post_stream

__all__ = ["PROVIDERS", "OpenAIBackend", "usage_of"]

#: Default base URLs of the providers with an OpenAI-compatible endpoint. Anthropic's key
#: goes only to Anthropic's own host.
PROVIDERS: dict[str, str] = {
    "openai": "https://api.openai.com/v1/",
    "anthropic": "https://api.anthropic.com/v1/",
    "gemini": "https://generativelanguage.googleapis.com/v1beta/openai/",
    "ollama": "http://127.0.0.1:11434/v1/",
    "llama-server": "http://127.0.0.1:8080/v1/",
    "lmstudio": "http://127.0.0.1:1234/v1/",
    "vllm": "http://127.0.0.1:8000/v1/",
}


@dataclass
class _PendingCall:
    index: int = -1  # our index, once announced
    id: str = ""
    name: str = ""
    args: list[str] = field(default_factory=list)


class OpenAIBackend(HttpTransport):
    """A model behind ``POST {base_url}chat/completions``."""

    name = "openai"
    default_base_url = PROVIDERS["openai"]
    path = "chat/completions"
    default_timeout = 120.0
    default_context_tokens = 32_768
    takes_images = True  # as image_url parts; files only where the engine documents them

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        dialect: str | None = None,
        engine: str | None = None,
        **options: Any,
    ) -> None:
        """``engine``: the server behind the URL (see :mod:`toolwire.backends.engines`;
        None: OpenAI's at its host, else ``generic``). ``options``: ``base_url``, ``client``,
        ``timeout``, ``context_tokens``, ``words``, ``memory`` (see
        :class:`~toolwire.backends.http.HttpTransport`)."""
        sent = {"Accept": "text/event-stream", **(headers or {})}
        if api_key:
            sent["Authorization"] = f"Bearer {api_key}"
        super().__init__(model, headers=sent, **options)
        self.dialect = dialect or _dialect_for(self.base_url)
        self.engine = engine_for(engine, self.base_url)
        if self.engine in CONSTRAINING:  # it decodes a required call under the schemas
            self.can_constrain = True
        self.takes_files = self.engine == "openai"
        if self.engine == "openai":  # OpenAI refuses a field it does not document
            self.sampling_fields = OPENAI_SAMPLING
            self.engine_fields = OPENAI_FIELDS
        self.takes_thinking = self.engine in THINKING
        #: until when (the memory's clock) a streamed request does not ask for the usage
        self._no_stream_usage_until: float | None = None

    @property
    def stream_usage(self) -> bool:
        """Does a streamed request ask for the usage? Yes, unless the server surely refused
        ``stream_options`` within the memory's ``ttl`` (see the module)."""
        until = self._no_stream_usage_until
        return until is None or until <= self.memory.clock()

    @stream_usage.setter
    def stream_usage(self, value: bool) -> None:
        """Set by the caller: False stops asking for good, True asks again."""
        self._no_stream_usage_until = None if value else float("inf")

    @staticmethod
    def normal_base(base_url: str) -> str:
        """The base URL with its path ending in ``/`` (a query, when it has one, after it)."""
        if "?" not in base_url and "#" not in base_url:
            return base_url if base_url.endswith("/") else base_url + "/"
        parts = urlsplit(base_url)
        path = parts.path if parts.path.endswith("/") else parts.path + "/"
        return urlunsplit(parts._replace(path=path, fragment=""))

    @classmethod
    def for_provider(
        cls, provider: str, model: str, *, api_key: str | None = None, **options: Any
    ) -> OpenAIBackend:
        """A backend at a known provider's own base URL (see :data:`PROVIDERS`), so its key
        goes to that provider's host and nowhere else."""
        try:
            base_url = PROVIDERS[provider]
        except KeyError:
            known = ", ".join(PROVIDERS)
            raise UsageError(f"unknown provider {provider!r}; known: {known}") from None
        options.setdefault("dialect", _PROVIDER_DIALECT.get(provider))
        options.setdefault("engine", _PROVIDER_ENGINE.get(provider))
        return cls(model, base_url=base_url, api_key=api_key, **options)

    def body(self, request: Request, dialect: str) -> dict[str, Any]:
        """The JSON body of a chat-completions request, its tool schemas in ``dialect`` (the
        pipeline's choice: see :class:`~toolwire.pipeline.Plan`); streamed unless the
        caller takes the reply whole (``request.stream``), and then read whole."""
        messages = [dict(m) for m in request.messages]
        if self.engine == "openai":  # it documents no reasoning_content, and refuses it
            messages = _without_reasoning(messages)
        body = Body(model=self.model, messages=messages, stream=request.stream)
        if request.tools:
            body["tools"] = self.tools_on_wire(request.tools, dialect)
            if request.tool_choice is not None:
                body["tool_choice"] = request.tool_choice
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.stream and self.stream_usage:
            body.update(STREAM_USAGE)
        fields, body.calls_in_content = _constraint_fields(request, self.engine, body)
        body.update(fields)
        body.update(thinking_fields(request, self.engine))
        # the client's sampling and engine fields, as sent: never one toolwire set itself,
        # nor one the engine is known to refuse (the turn names those)
        given = {**request.extra, **request.sampling.given()}
        for key, value in given.items():
            if key in request.extra and self.engine_fields is not None:
                if key not in self.engine_fields:
                    continue
            elif self.sampling_fields is not None and key not in self.sampling_fields:
                continue
            body.setdefault(key, value)
        return body

    def read(self, reply: Reply) -> AsyncGenerator[Event, None]:
        return _read_stream(reply)

    @property
    def counts(self) -> bool:
        """Does the engine count a prompt's tokens (:meth:`count_prompt`)?"""
        return self.engine in COUNTING

    async def count_prompt(self, sent: Request, plan: Plan) -> int | None:
        """The prompt tokens of a turn as this engine counts them: its own template and
        tokenizer over the body the pipeline would send for ``sent`` and its ``plan`` (the
        pipeline's, :func:`~toolwire.pipeline.planned`: ``/apply-template`` then
        ``/tokenize`` on llama-server, ``/tokenize`` on vLLM); None where the engine has no
        such route, or it did not answer with a count."""
        if not self.counts:
            return None
        body = self.body(sent, plan.dialect)
        keys: tuple[str, ...] = ("messages", "tools", "chat_template_kwargs")
        asked: dict[str, Any] = {k: body[k] for k in keys if k in body}
        root = _root(self.base_url)
        try:
            if self.engine == "llama-server":
                rendered = await self._post_json(root + "apply-template", asked)
                prompt = rendered["prompt"]
                if not isinstance(prompt, str):
                    return None
                content = {"content": prompt, "add_special": True, "parse_special": True}
                tokens = (await self._post_json(root + "tokenize", content))["tokens"]
                return len(tokens) if isinstance(tokens, list) else None
            counted = await self._post_json(
                root + "tokenize", {"model": self.model, "add_generation_prompt": True, **asked}
            )
            count = counted["count"]
            return count if isinstance(count, int) and not isinstance(count, bool) else None
        except (BackendError, KeyError, TypeError, ValueError):
            return None

    async def _post_json(self, url: str, body: Mapping[str, Any]) -> Any:
        """POST ``body`` to ``url`` of this engine and read its JSON answer (bounded)."""

        async def whole(reply: Reply) -> AsyncGenerator[Any, None]:
            text, complete = await reply.text(MAX_COUNT_BYTES)
            if not complete:
                raise ValueError("the answer is too long")
            yield json.loads(text)

        async with aclosing(
            post_stream(
                self._client,
                url,
                body,
                whole,
                headers=self._headers,
                timeout=min(self._timeout, COUNT_TIMEOUT),
                connect_timeout=self._connect_timeout,
            )
        ) as answers:
            async for answer in answers:
                return answer
        raise ValueError("no answer")

    async def send(self, prepared: Prepared) -> AsyncGenerator[Event, None]:
        """The reply's events; sent again without ``stream_options`` when the server
        refused that field before saying a word (see the module)."""
        heard = False
        try:
            async for event in self._exchange(prepared):
                heard = True
                yield event
        except BackendError as exc:
            body = prepared.payload
            if not heard and _refuses_reasoning(exc, body):
                # an engine that takes no reasoning back (a strict request model): the
                # turn goes again without it, and says so
                yield ev.Notice(
                    "field-not-honoured",
                    f"not applied on {self.model}: reasoning_content (the model's earlier "
                    "reasoning, which the server refused)",
                )
                again = Body(body, messages=_without_reasoning(body["messages"]))
                again.calls_in_content = getattr(body, "calls_in_content", False)
                async for event in self._exchange(replace(prepared, payload=again)):
                    yield event
                return
            asked = isinstance(body, dict) and "stream_options" in body
            if heard or not asked or not refuses_stream_options(exc):
                raise
            if refuses_field(exc, "stream_options"):  # sure: later requests go without it
                self._no_stream_usage_until = self.memory.clock() + self.memory.ttl
            yield ev.Notice(
                "healed-stream-usage",
                "the server refused stream_options; sent again without it, so the stream "
                "gives no usage",
            )
            again = Body({k: v for k, v in body.items() if k != "stream_options"})
            again.calls_in_content = getattr(body, "calls_in_content", False)
            async for event in self._exchange(replace(prepared, payload=again)):
                yield event

    async def _exchange(self, prepared: Prepared) -> AsyncGenerator[Event, None]:
        """One exchange; when the reply's content was decoded as a call (see
        :func:`~toolwire.backends.engines.calls_from_content`), read back as that call."""
        body = prepared.payload
        if not (isinstance(body, Body) and body.calls_in_content):
            async for event in super().send(prepared):
                yield event
            return
        events = super().send(prepared)
        try:
            async for event in calls_from_content(events, body.get("tools") or []):
                yield event
        finally:
            await events.aclose()


def _constraint_fields(
    request: Request, engine: str, body: Mapping[str, Any]
) -> tuple[dict[str, Any], bool]:
    """The fields that constrain ``request`` on ``engine`` (the only place the body learns
    them), and whether the reply's content is then a call: see
    :func:`~toolwire.backends.engines.constraint_fields`."""
    return constraint_fields(request, engine, body.get("tools"))


#: The sampling fields OpenAI's own API documents, and its other request fields a client
#: may send (any other is a 400 there: the turn names it instead).
OPENAI_SAMPLING = frozenset(
    {"top_p", "seed", "stop", "presence_penalty", "frequency_penalty", "logit_bias"}
)
OPENAI_FIELDS = frozenset(
    {
        "user",
        "metadata",
        "store",
        "service_tier",
        "prompt_cache_key",
        "safety_identifier",
        "reasoning_effort",
        "verbosity",
        "prediction",
        "logprobs",
        "top_logprobs",
    }
)
#: The engines that count a prompt's tokens for toolwire (see :meth:`OpenAIBackend.count_prompt`).
COUNTING = frozenset({"llama-server", "vllm"})
#: A count's answer is a list of token ids, bounded (about 4 bytes a token).
MAX_COUNT_BYTES = 8 * 1024 * 1024
#: Seconds a count may take.
COUNT_TIMEOUT = 60.0


def _without_reasoning(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without the earlier reasoning given back on assistant messages."""
    return [{k: v for k, v in m.items() if k != "reasoning_content"} for m in messages]


def _refuses_reasoning(error: BackendError, body: Any) -> bool:
    """Whether ``error`` is a server refusing ``reasoning_content`` in the messages it was
    given (a 400 or 422 naming the field), which the turn can go again without."""
    given = isinstance(body, dict) and any(
        "reasoning_content" in m for m in body.get("messages") or () if isinstance(m, dict)
    )
    named = "reasoning_content" in (error.body or str(error))
    return given and named and error.kind == "refused" and error.status in (400, 422)


def _root(base_url: str) -> str:
    """The server's root from its OpenAI base URL (``http://h:8080/v1/`` → ``http://h:8080/``):
    where llama-server and vLLM serve ``/tokenize``."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path + "/", "", ""))


_PROVIDER_DIALECT = {"gemini": "gemini", "anthropic": "anthropic"}
_PROVIDER_ENGINE = {"openai": "openai", "vllm": "vllm", "llama-server": "llama-server"}


def _dialect_for(base_url: str) -> str:
    if "generativelanguage.googleapis.com" in base_url:
        return "gemini"
    if "api.anthropic.com" in base_url:
        return "anthropic"
    return "permissive"


def _fresh_id() -> str:
    """An id for a call the provider sent without one: unique, so operation ids derived
    from it never repeat across turns."""
    return "call_" + secrets.token_hex(8)


class _Slots:
    """Which pending call each ``tool_calls`` entry belongs to: its index; else its id; else
    the last call. An index used again by a call with another id, or with another name once
    the first call's arguments began, is another call: the two are kept apart (some servers
    number each call 0), never merged with the second one's arguments lost."""

    def __init__(self) -> None:
        self.calls: dict[Any, _PendingCall] = {}
        self._by_index: dict[int, Any] = {}
        self._by_id: dict[str, Any] = {}

    def find(
        self, tc: Mapping[str, Any], name: str, position: int | None
    ) -> tuple[_PendingCall, str]:
        """The call ``tc`` adds to, and a notice's text when it reused another call's index.

        ``position`` is its place in a whole message's list (each entry a whole call)."""
        cid = tc.get("id") if isinstance(tc.get("id"), str) and tc.get("id") else ""
        index = tc.get("index")
        if position is not None:
            return self._new(("message", position)), ""
        if isinstance(index, int) and not isinstance(index, bool):
            key = self._by_index.get(index)
            note = ""
            if key is not None:
                held = self.calls[key]
                other_id = bool(cid and held.id and cid != held.id)
                other_name = bool(name and held.index >= 0 and name != held.name)
                if other_id or other_name:
                    note = (
                        f"the provider sent two calls at index {index} ({held.name or '?'} and "
                        f"{name or held.name or '?'}); they were read as two calls"
                    )[:300]
                    key = None
            if key is None:
                key = ("index", index, len(self.calls))
                self._by_index[index] = key
            if cid:
                self._by_id.setdefault(cid, key)
            return self._new(key), note
        if cid:
            key = self._by_id.setdefault(cid, ("id", len(self.calls)))
            return self._new(key), ""
        return (self.calls[next(reversed(self.calls))] if self.calls else self._new(("id", 0))), ""

    def _new(self, key: Any) -> _PendingCall:
        return self.calls.setdefault(key, _PendingCall())


def _entries(calls: Any) -> tuple[list[Any], ev.Notice | None]:
    """A delta's ``tool_calls`` as a list, and a notice when they came in another shape."""
    if calls is None or isinstance(calls, list):
        return calls or [], None
    if isinstance(calls, dict) and ("function" in calls or "name" in calls):
        return [calls], ev.Notice(
            "recovered-tool-calls-object",
            "the provider sent tool_calls as one object, not a list; it was read as one call",
        )
    return [], ev.Notice(
        "call-not-read",
        f"the provider sent tool_calls as {type(calls).__name__}, not a list; nothing was read",
    )


def usage_of(given: Mapping[str, Any]) -> dict[str, int]:
    """A usage object's counts: its whole numbers, and the prompt's cached tokens
    (``prompt_tokens_details.cached_tokens``, OpenAI's, vLLM's and llama-server's) as
    ``cached_tokens``."""
    usage = {k: v for k, v in given.items() if type(v) is int}
    details = given.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if type(cached) is int:
        usage["cached_tokens"] = cached
    return usage


def _unreadable(what: str, value: Any) -> BackendError:
    shown = json.dumps(value)[:200]
    return BackendError(f"the provider sent {what}: {shown}", kind="unreadable")


async def _read_stream(reply: Reply) -> AsyncGenerator[Event, None]:
    slots = _Slots()
    calls = slots.calls
    announced = 0
    finish = ""
    usage: dict[str, int] | None = None

    def announce(pending: _PendingCall) -> list[ev.CallStart | ev.CallArgsDelta]:
        nonlocal announced
        pending.index = announced
        announced += 1
        pending.id = pending.id or _fresh_id()
        return [ev.CallStart(pending.index, pending.id, pending.name)] + [
            ev.CallArgsDelta(pending.index, held) for held in pending.args
        ]

    records = Records(reply, sse=True, who="the provider")
    async for chunk in records:
        if isinstance(chunk.get("usage"), dict):
            usage = usage_of(chunk["usage"])
        choices = chunk.get("choices")
        if choices is not None and not isinstance(choices, list):
            raise _unreadable("choices that are not a list", choices)
        for choice in choices or ():
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue  # one reply: the first choice
            whole = "delta" not in choice and "message" in choice  # a reply sent whole
            delta = choice.get("delta") or choice.get("message") or {}
            if not isinstance(delta, dict):
                raise _unreadable("a delta that is not an object", delta)
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str) and delta[key]:
                    yield ev.ReasoningDelta(delta[key])
            if isinstance(delta.get("content"), str) and delta["content"]:
                yield ev.TextDelta(delta["content"])
            entries, notice = _entries(delta.get("tool_calls"))
            if notice is not None:
                yield notice
            for position, tc in enumerate(entries):
                if not isinstance(tc, dict):
                    yield ev.Notice(
                        "call-not-read", "the provider sent a call that is not an object"
                    )
                    continue
                fn = tc.get("function", tc if "name" in tc else {}) or {}
                if not isinstance(fn, dict):
                    raise _unreadable("a function that is not an object", fn)
                name = fn["name"] if isinstance(fn.get("name"), str) else ""
                pending, split = slots.find(tc, name, position if whole else None)
                if split:
                    yield ev.Notice("calls-kept-apart", split)
                if isinstance(tc.get("id"), str) and tc["id"] and not pending.id:
                    pending.id = tc["id"]
                if name and pending.index < 0:
                    pending.name += name  # a name may come in pieces, before arguments
                piece = fn.get("arguments")
                if whole and piece is None:
                    piece = ""  # a whole call: its arguments are all there is
                if isinstance(piece, dict):  # some servers send the object, not its text
                    piece = json.dumps(piece, ensure_ascii=False)
                if isinstance(piece, str):  # arguments begun (even ""): the name is whole
                    if pending.index < 0 and pending.name:
                        for event in announce(pending):
                            yield event
                    if piece:
                        pending.args.append(piece)
                        if pending.index >= 0:
                            yield ev.CallArgsDelta(pending.index, piece)
            if choice.get("finish_reason"):
                finish = str(choice["finish_reason"])
    if not records.ended and not finish:
        raise BackendError("the stream ended before the reply was complete", kind="unreadable")
    for pending in calls.values():
        if pending.index < 0 and pending.name:
            for event in announce(pending):
                yield event
    for pending in sorted(calls.values(), key=lambda p: p.index):
        if pending.index < 0:  # arguments with no name: nothing to call
            yield ev.Notice(
                "call-not-read", "the provider sent a call without a name; it was dropped"
            )
            continue
        text = "".join(pending.args)
        try:
            parsed = json.loads(text) if text.strip() else {}
        except (ValueError, RecursionError):
            parsed = None
        arguments = parsed if isinstance(parsed, dict) else {}
        yield ev.CallEnd(pending.index, ToolCall(pending.id, pending.name, arguments, text))
    yield ev.Done(finish or "stop", usage)
