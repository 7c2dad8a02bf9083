"""What the gateway does with each field of a request, one rule for every client API.

A field is one of three things:

* **used by toolwire**: read into the turn (the conversation, the tools and ``tool_choice``,
  streaming, ``temperature``, the token limit, a structured output, the API's own
  bookkeeping: a stored response's id, Messages' ``thinking``), or refused there where the
  reply could not be what was asked (``n`` other than 1, audio);
* **a sampling field** (:class:`~toolwire.pipeline.sampling.Sampling`): checked here, then
  given to the engine in its own dialect (Messages' ``stop_sequences`` is ``stop``);
* **passed to the engine as sent**: every other field, ``chat_template_kwargs``,
  ``reasoning_effort``, ``prompt_cache_key``, ``user`` and fields no API lists among them (the
  engine decides what they mean), a few under the Chat Completions name the engines read
  (Responses' ``reasoning.effort`` is ``reasoning_effort``).

So nothing a client sends is dropped in silence: an engine that cannot honour a field says so
in a ``field-not-honoured`` notice. ``docs/gateway.md``'s table of the fields is made from
:func:`table`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..pipeline.sampling import Sampling
from .refusal import RequestError

__all__ = ["API", "OLLAMA_OPTIONS", "USED", "WITHHELD", "engine_fields", "table", "thinking"]

API = Literal["chat", "responses", "messages", "gemini"]

#: The fields each API's request uses itself (its request reader reads them into the turn).
USED: dict[API, frozenset[str]] = {
    "chat": frozenset(
        {
            "messages",
            "model",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "stream",
            "stream_options",
            "temperature",
            "max_tokens",
            "max_completion_tokens",
            "n",
            "response_format",
            "toolwire",
            "functions",
            "function_call",
            "audio",
            "modalities",
            "web_search_options",
        }
    ),
    "responses": frozenset(
        {
            "model",
            "input",
            "instructions",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "max_output_tokens",
            "max_tool_calls",
            "temperature",
            "stream",
            "stream_options",
            "store",
            "previous_response_id",
            "text",
            "toolwire",
            "metadata",
            "include",
            "truncation",
            "background",
            "service_tier",
            "reasoning",
            "prompt",
            "conversation",
        }
    ),
    "messages": frozenset(
        {
            "model",
            "messages",
            "system",
            "max_tokens",
            "temperature",
            "tools",
            "tool_choice",
            "thinking",
            "stream",
            "output_config",
            "toolwire",
            "metadata",
            "service_tier",
            "context_management",
            "cache_control",
            "container",
            "diagnostics",
            "inference_geo",
            "speed",
            "user_profile_id",
            "workspace_id",
        }
    ),
    "gemini": frozenset(
        {
            "model",
            "contents",
            "systemInstruction",
            "tools",
            "toolConfig",
            "generationConfig",
            "safetySettings",
            "cachedContent",
            "labels",
            "toolwire",
        }
    ),
}

#: Each API's name for a sampling field, where it is not the field's own.
_SAMPLING_NAMES: dict[API, dict[str, str]] = {
    "chat": {},
    "responses": {},
    "messages": {"stop_sequences": "stop"},
    # (a Gemini body's sampling fields are inside generationConfig: its reader lifts them)
    "gemini": {
        "generationConfig.topP": "top_p",
        "generationConfig.topK": "top_k",
        "generationConfig.seed": "seed",
        "generationConfig.stopSequences": "stop",
        "generationConfig.presencePenalty": "presence_penalty",
        "generationConfig.frequencyPenalty": "frequency_penalty",
    },
}

#: Fields an API sends under another name than the one engines read, and how to reach it:
#: (the API's field, the key inside it or "", the engine's name).
_RENAMED: dict[API, tuple[tuple[str, str, str], ...]] = {
    "chat": (),
    "responses": (("reasoning", "effort", "reasoning_effort"),),
    "messages": (("metadata", "user_id", "user"),),
    "gemini": (),
}

#: The most tokens a ``logit_bias`` biases (OpenAI's bound).
MAX_BIASES = 300
#: The most stop texts, and the longest (llama-server and vLLM take any; a bound).
MAX_STOPS = 16
MAX_STOP_CHARS = 200

_Unit = Annotated[float, Field(ge=0, le=1)]
_Penalty = Annotated[float, Field(ge=-2, le=2)]
_Stop = Annotated[str, Field(min_length=1, max_length=MAX_STOP_CHARS)]


class _Sampling(BaseModel):
    """The sampling fields, checked strictly (``"0.9"`` is no number)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    top_p: _Unit | None = None
    top_k: Annotated[int, Field(ge=0)] | None = None
    min_p: _Unit | None = None
    seed: int | None = None
    stop: Annotated[list[_Stop], Field(max_length=MAX_STOPS)] | None = None
    presence_penalty: _Penalty | None = None
    frequency_penalty: _Penalty | None = None
    repetition_penalty: Annotated[float, Field(gt=0)] | None = None
    logit_bias: (
        Annotated[
            dict[
                Annotated[str, Field(pattern=r"^[0-9]{1,10}$")],
                Annotated[float, Field(ge=-100, le=100)],
            ],
            Field(max_length=MAX_BIASES),
        ]
        | None
    ) = None


_SAMPLING_FIELDS = tuple(_Sampling.model_fields)
_NONE = _Sampling()


#: Fields never passed on, whatever the API: each changes what an engine does for every
#: client it serves (its queue, its slots, how long it keeps a model loaded) or sets a token
#: limit beside the one the API's own field sets. Named in a ``field-not-honoured`` notice.
WITHHELD = frozenset(
    {
        "n_predict",
        "num_predict",
        "max_tokens",
        "max_completion_tokens",
        "max_output_tokens",
        "priority",
        "id_slot",
        "slot_id",
        "keep_alive",
    }
)
#: Ollama's ``options`` that shape one reply; its others (``num_ctx``, ``num_gpu``,
#: ``use_mmap``…) load the model anew, for every client: withheld.
OLLAMA_OPTIONS = frozenset(
    {
        "temperature",
        "top_k",
        "top_p",
        "min_p",
        "typical_p",
        "seed",
        "stop",
        "repeat_last_n",
        "repeat_penalty",
        "presence_penalty",
        "frequency_penalty",
        "penalize_newline",
        "mirostat",
        "mirostat_tau",
        "mirostat_eta",
        "tfs_z",
        "num_keep",
    }
)
#: Fields refused above one: the reply is one answer, one choice.
_ONE = ("n", "best_of")
#: An API's fields the gateway cannot serve: the reply could not be what they ask.
_NOT_SERVED: dict[API, dict[str, str]] = {
    "responses": {
        "conversation": "is not served: the gateway keeps responses, not conversations "
        "(send previous_response_id, or the whole input)",
        "prompt": "is not served: the gateway keeps no prompt templates",
    },
    "gemini": {
        "cachedContent": "is not served: the gateway keeps no cached contents (send the "
        "whole conversation)",
    },
}


#: Fields another API reads into the turn that a Gemini body may carry beside its own: they
#: would contradict what its own fields decided (``tool_choice`` beside ``toolConfig``), so
#: they are withheld, and named.
_FOREIGN: dict[API, frozenset[str]] = {
    "gemini": (USED["chat"] | USED["responses"] | USED["messages"]) - {"model", "toolwire"},
}


def engine_fields(
    data: Mapping[str, Any],
    api: API,
    explain: Callable[[Mapping[str, Any]], RequestError] | None = None,
) -> tuple[Sampling, dict[str, Any], tuple[str, ...]]:
    """The request's sampling fields, checked; the fields passed to the engine as sent (see
    the module); and those withheld from it (:data:`WITHHELD`). A malformed sampling field,
    or more than one choice asked for, is a :class:`RequestError` naming it as the API does
    (``explain`` turns pydantic's error into the API's words)."""
    for key in _ONE:
        if key not in USED[api] and data.get(key) not in (None, 1):
            raise RequestError(f"{key}: must be 1: the gateway gives one choice", key)
    for key, why in _NOT_SERVED.get(api, {}).items():
        if data.get(key) is not None:
            raise RequestError(f"{key}: {why}", key)
    names = {**{f: f for f in _SAMPLING_FIELDS}, **_SAMPLING_NAMES[api]}
    given = {names[k]: v for k, v in data.items() if k in names and v is not None}
    if isinstance(given.get("stop"), str):  # one text, or a list of them
        given["stop"] = [given["stop"]]
    try:
        checked = _Sampling.model_validate(given) if given else _NONE
    except ValidationError as exc:
        first: dict[str, Any] = dict(exc.errors(include_url=False)[0])
        loc = tuple(first["loc"])
        field = str(loc[0]) if loc else ""
        sent = next((k for k, v in names.items() if v == field and k in data), field)
        first["loc"] = (sent, *loc[1:])
        if explain is not None:
            raise explain(first) from None
        raise RequestError(f"'{sent}' {str(first['msg'])[:200]}", sent or None) from None
    sampling = Sampling(
        top_p=checked.top_p,
        top_k=checked.top_k,
        min_p=checked.min_p,
        seed=checked.seed,
        stop=tuple(checked.stop or ()),
        presence_penalty=checked.presence_penalty,
        frequency_penalty=checked.frequency_penalty,
        repetition_penalty=checked.repetition_penalty,
        logit_bias=checked.logit_bias,
    )
    passed = {
        k: v for k, v in data.items() if k not in USED[api] and k not in names and v is not None
    }
    withheld = sorted(k for k in passed if k in WITHHELD or k in _FOREIGN.get(api, ()))
    for key in withheld:
        del passed[key]
    options = passed.get("options")
    if isinstance(options, Mapping):
        withheld += sorted(f"options.{k}" for k in options if k not in OLLAMA_OPTIONS)
        passed["options"] = {k: v for k, v in options.items() if k in OLLAMA_OPTIONS}
    for field, key, engine in _RENAMED[api]:
        value = data.get(field)
        inner = value.get(key) if isinstance(value, Mapping) else None
        if inner is not None and engine not in passed:
            passed[engine] = inner
    return sampling, passed, tuple(withheld)


def thinking(effort: Any) -> bool | None:
    """The turn's thinking switch from a reasoning effort (Chat Completions'
    ``reasoning_effort``, Responses' ``reasoning.effort``): ``none`` is off, any other effort
    on, none given leaves the model's default. Messages' ``thinking`` says it directly."""
    return None if not isinstance(effort, str) else effort != "none"


def table() -> str:
    """The fields of each API and what the gateway does with them, as a Markdown table (the
    one in ``docs/gateway.md``)."""
    rows = ["| API | used by toolwire | sampling, to the engine in its dialect | renamed |"]
    rows.append("| --- | --- | --- | --- |")
    for api, used in USED.items():
        own = {v: k for k, v in _SAMPLING_NAMES[api].items()}
        sampling = ", ".join(f"`{own.get(f, f)}`" for f in _SAMPLING_FIELDS)
        renamed = ", ".join(
            f"`{field}{'.' + key if key else ''}` → `{engine}`"
            for field, key, engine in _RENAMED[api]
        )
        rows.append(
            f"| {api} | {', '.join(f'`{f}`' for f in sorted(used))} | {sampling} | "
            f"{renamed or '—'} |"
        )
    withheld = ", ".join(f"`{f}`" for f in sorted(WITHHELD))
    return "\n".join(rows) + (
        "\n\nEvery other field is passed to the engine as sent, but these, which change what an "
        f"engine does for every client or set a second token limit: {withheld}, and "
        "Ollama's `options` that load the model anew (all but "
        f"{', '.join(f'`{o}`' for o in sorted(OLLAMA_OPTIONS))}). `n` and `best_of` above 1 "
        "are refused. A Gemini request's fields that the other APIs read into their turn "
        "(`tool_choice`, `response_format`, `messages`…) are withheld too: its own fields "
        "decided the turn.\n"
    )
