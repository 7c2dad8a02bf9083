"""A Gemini API request (``POST /v1beta/models/{model}:generateContent``,
``:streamGenerateContent``, ``:countTokens``) read into one turn.

In: ``contents`` (roles ``user`` and ``model``; ``function`` and a missing role read as
``user``) whose ``parts`` are ``text`` (``thought: true``: the model's reasoning, given back
to it), ``inlineData`` and ``fileData`` (images as image parts, other media as files),
``functionCall`` and ``functionResponse``; ``systemInstruction``;
``tools[].functionDeclarations[]`` with ``parametersJsonSchema`` (a JSON schema, as sent) or
``parameters`` (the OpenAPI subset, read into JSON schema: :func:`json_schema`);
``toolConfig.functionCallingConfig`` (``AUTO``, ``ANY``, ``NONE``, ``VALIDATED``;
``allowedFunctionNames``); ``generationConfig`` (``temperature``, ``maxOutputTokens``,
``candidateCount`` 1, a structured output as ``responseMimeType: application/json`` with
``responseJsonSchema`` or ``responseSchema``, ``thinkingConfig``; ``topP``, ``topK``,
``seed``, ``stopSequences`` and the two penalties are the engine's sampling fields).

Gemini's calls need no ids: a ``functionResponse`` answers the call of its ``id`` when it
names one made before, else the first call of its name not yet answered, in order — as
the API matches them. A call the model made with no id is given one here
(``gemini-{content}-{part}``); the gateway's own replies carry their calls' ids, which
clients echo. Server tools (``googleSearch``, ``codeExecution``…) are left out with a
``tool-not-served`` notice; ``safetySettings`` changes nothing here, and ``cachedContent``
(a cache this gateway never made) is refused;
another ``generationConfig`` field is named in a ``field-not-honoured`` notice; a top-level
field this API does not have goes to the engine as sent (:mod:`toolwire.server.passing`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..budget import WorkBudget
from ..pipeline import OutputFormat, Request
from .core import Told
from .fields import check, options
from .gemini_contents import read_contents
from .output import messages_format
from .passing import engine_fields
from .validate import Declared, Origins, RequestError, check_turn, required_needs_tools

__all__ = ["GeminiCall", "json_schema", "parse_gemini"]

#: The OpenAPI schema keys that hold one schema, and those that hold schemas by name or
#: in a list.
_ONE = ("items", "not", "additionalProperties")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_NAMED = ("properties", "$defs", "definitions")
#: OpenAPI keys with no JSON-schema meaning (dropped) and those renamed.
_DROPPED = frozenset({"nullable", "propertyOrdering", "example"})
#: OpenAPI's type names (a JSON schema's are lower case, and kept).
_TYPES = frozenset(
    {"TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"}
)


class _Fields(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    contents: list[Any] = Field(min_length=1)
    systemInstruction: dict[str, Any] | str | None = None
    tools: list[Any] | None = None
    toolConfig: dict[str, Any] | None = None
    generationConfig: dict[str, Any] | None = None


class _Thinking(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    includeThoughts: bool | None = None
    thinkingBudget: int | None = None
    thinkingLevel: str | None = None


_Temperature = Annotated[float | int, Field(ge=0, le=2)]


class _Generation(BaseModel):
    """The ``generationConfig`` fields read here; the sampling ones are checked by
    :func:`~toolwire.server.passing.engine_fields`."""

    model_config = ConfigDict(extra="allow", strict=True)

    temperature: _Temperature | None = None
    maxOutputTokens: Annotated[int, Field(ge=1, le=10**9)] | None = None
    candidateCount: Literal[1] | None = None
    responseMimeType: str | None = None
    responseSchema: dict[str, Any] | None = None
    responseJsonSchema: dict[str, Any] | None = None
    thinkingConfig: dict[str, Any] | None = None


#: ``generationConfig``'s sampling fields, by the name :mod:`.passing` checks them under.
SAMPLING = ("topP", "topK", "seed", "stopSequences", "presencePenalty", "frequencyPenalty")
#: The ``generationConfig`` fields read into the turn; others are named as not honoured.
_READ = frozenset(_Generation.model_fields) | frozenset(SAMPLING)


class _Declaration(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    name: str = Field(min_length=1, max_length=256)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    parametersJsonSchema: dict[str, Any] | None = None


class _CallingConfig(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    mode: Literal["AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED"] = "AUTO"
    allowedFunctionNames: list[str] | None = None


class GeminiCall:
    """A parsed Gemini request: the turn, the model its path named, what it was told, and
    whether the client asked to see the model's thoughts."""

    def __init__(
        self, request: Request, model: str | None, notices: list[Told], thoughts: bool
    ) -> None:
        self.request, self.model, self.notices = request, model, notices
        #: ``thinkingConfig.includeThoughts``: thoughts are in the reply only when asked.
        self.thoughts = thoughts


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _keys(value: Any, *within: str) -> Any:
    """A message of Google's API with its fields' snake_case names (which its JSON takes
    alike, and Google's Python SDK sends inside some) in camelCase; the fields named in
    ``within`` in turn (a path: ``"parts.functionCall"``). Values are left as they are: a
    call's arguments, a schema's property names."""
    if isinstance(value, list):
        return [_keys(v, *within) for v in value]
    if not isinstance(value, dict):
        return value
    out = {(_camel(k) if "_" in k else k): v for k, v in value.items()}
    inner: dict[str, list[str]] = {}
    for path in within:
        head, _, tail = path.partition(".")
        inner.setdefault(head, []).extend([tail] if tail else [])
    for head, tails in inner.items():
        if head in out:
            out[head] = _keys(out[head], *tails)
    return out


_PART = ("functionCall", "functionResponse", "inlineData", "fileData")
#: The messages of a request whose fields may come in snake_case (see :func:`_keys`).
_MESSAGES = (
    "systemInstruction.parts",
    *(f"contents.parts.{p}" for p in _PART),
    "tools.functionDeclarations",
    "toolConfig.functionCallingConfig",
    "generationConfig.thinkingConfig",
)
#: The top-level fields of a request (the others go to the engine as sent).
_TOP = {
    "system_instruction",
    "tool_config",
    "generation_config",
    "safety_settings",
    "cached_content",
}


def _request(data: Mapping[str, Any]) -> dict[str, Any]:
    """The request with Google's field names in camelCase (see :func:`_keys`)."""
    top = {(_camel(k) if k in _TOP else k): v for k, v in data.items()}
    return {k: (_keys(v, *_within(k)) if k in _NESTED else v) for k, v in top.items()}


_NESTED = frozenset(p.partition(".")[0] for p in _MESSAGES) | {"contents"}


def _within(head: str) -> list[str]:
    return [p.partition(".")[2] for p in _MESSAGES if p.startswith(head + ".")]


def json_schema(node: Any, proto: bool = False) -> Any:
    """An OpenAPI schema (Gemini's ``parameters``: ``type: OBJECT``, ``nullable``) as the
    JSON schema it means. One pass over the schema (its depth bounded when its body was
    decoded); keys with no JSON-schema meaning are dropped. A JSON schema is read by it
    too: Gemini's clients write OpenAPI's type names in their JSON schemas, and Gemini
    takes them."""
    if not isinstance(node, dict):
        return node
    if proto:  # a message of Google's API: its fields may be named in snake_case
        node = _keys(node)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "type" and isinstance(value, str) and value in _TYPES:
            out["type"] = value.lower() if value != "TYPE_UNSPECIFIED" else None
        elif key in _ONE:
            out[key] = json_schema(value, proto)
        elif key in _MANY and isinstance(value, list):
            out[key] = [json_schema(v, proto) for v in value]
        elif key in _NAMED and isinstance(value, dict):
            out[key] = {k: json_schema(v, proto) for k, v in value.items()}
        else:
            out[key] = value
    if out.get("type") is None:
        out.pop("type", None)
    if node.get("nullable") is True:  # (a malformed anyOf or enum is left to the check)
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(out.get("anyOf"), list):
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    return out


def _tools(fields: _Fields, told: list[Told], declared: list[Declared]) -> list[dict[str, Any]]:
    """The function declarations as Chat Completions tools; a server tool is left out with
    a ``tool-not-served`` notice."""
    out: list[dict[str, Any]] = []
    for i, given in enumerate(fields.tools or ()):
        if not isinstance(given, dict):
            raise RequestError(f"'tools[{i}]' must be a tool object", f"tools[{i}]")
        for kind in given:
            if kind != "functionDeclarations":
                told.append(
                    Told(
                        "tool-not-served",
                        f"tools[{i}].{kind[:40]} was left out: only functionDeclarations are "
                        "served",
                    )
                )
        declarations = given.get("functionDeclarations") or []
        if not isinstance(declarations, list):
            raise RequestError(
                f"'tools[{i}].functionDeclarations' must be a list",
                f"tools[{i}].functionDeclarations",
            )
        for k, raw in enumerate(declarations):
            at = f"tools[{i}].functionDeclarations[{k}]"
            fn = check(_Declaration, raw, at)
            if fn.parametersJsonSchema is not None:  # (OpenAPI's type names read, as Gemini does)
                schema = json_schema(fn.parametersJsonSchema)
                schema_at = f"{at}.parametersJsonSchema"
            elif fn.parameters is not None:
                schema, schema_at = json_schema(fn.parameters, True), f"{at}.parameters"
            else:
                schema, schema_at = {"type": "object", "properties": {}}, at
            declared.append(Declared(fn.name, f"{at}.name", schema, schema_at))
            function: dict[str, Any] = {"name": fn.name, "parameters": schema}
            if fn.description is not None:
                function["description"] = fn.description
            out.append({"type": "function", "function": function})
    return out


def _choice(fields: _Fields, tools: list[dict[str, Any]]) -> tuple[Any, list[dict[str, Any]]]:
    """``toolConfig.functionCallingConfig`` as a tool choice, and the tools it allows."""
    config = (fields.toolConfig or {}).get("functionCallingConfig")
    if config is None:
        return None, tools
    at = "toolConfig.functionCallingConfig"
    picked = check(_CallingConfig, config, at)
    if picked.mode == "NONE":
        return "none", tools
    allowed = picked.allowedFunctionNames
    if allowed is not None:
        names = {t["function"]["name"] for t in tools}
        for n, name in enumerate(allowed):
            if name not in names:
                raise RequestError(
                    f"'{at}.allowedFunctionNames[{n}]' names {name[:80]!r}, which no function "
                    "declaration declares",
                    f"{at}.allowedFunctionNames[{n}]",
                )
        tools = [t for t in tools if t["function"]["name"] in allowed]
    if picked.mode != "ANY":
        return "auto", tools
    required_needs_tools("required", tools, f"{at}.mode")
    if len(tools) == 1:
        return {"type": "function", "function": {"name": tools[0]["function"]["name"]}}, tools
    return "required", tools


def _output(config: _Generation) -> OutputFormat | None:
    """A structured output: ``responseMimeType`` ``application/json``, with a schema or
    not. A schema with another type is refused, as Gemini refuses it; so is
    ``text/x.enum`` (a bare enum value, which the gateway does not write)."""
    if config.responseMimeType in (None, "text/plain"):
        if config.responseSchema is not None or config.responseJsonSchema is not None:
            raise RequestError(
                "'generationConfig.responseMimeType' must be application/json with a "
                "response schema",
                "generationConfig.responseMimeType",
            )
        return None
    if config.responseMimeType != "application/json":
        raise RequestError(
            "'generationConfig.responseMimeType' must be text/plain or application/json",
            "generationConfig.responseMimeType",
        )
    if config.responseJsonSchema is not None:
        schema, where = json_schema(config.responseJsonSchema), "responseJsonSchema"
    elif config.responseSchema is not None:
        schema, where = json_schema(config.responseSchema, True), "responseSchema"
    else:
        return OutputFormat("json_object")
    spec = {"format": {"type": "json_schema", "schema": schema}}
    found = messages_format(spec, f"generationConfig.{where}")
    assert found is not None
    return OutputFormat("json_schema", found.schema, name="output", strict=False)


def _thinking(config: _Generation) -> tuple[bool | None, bool, str | None]:
    """``thinkingConfig``: the turn's thinking switch (a budget of 0 is off, another
    budget or a level on), whether thoughts are shown, and the level as an effort."""
    if config.thinkingConfig is None:
        return None, False, None
    given = check(_Thinking, config.thinkingConfig, "generationConfig.thinkingConfig")
    level = given.thinkingLevel.lower() if given.thinkingLevel else None
    if level == "thinking_level_unspecified":
        level = None
    think: bool | None = None
    if given.thinkingBudget is not None:
        think = given.thinkingBudget != 0
    elif level is not None:
        think = level != "minimal"
    return think, bool(given.includeThoughts), level


def parse_gemini(
    data: Mapping[str, Any],
    model: str | None,
    stream: bool,
    budget: WorkBudget | None = None,
    counting: bool = False,
) -> GeminiCall:
    """The turn of a Gemini body (already JSON, an object) sent to ``model``'s method;
    ``counting``: only its tokens are wanted (see :func:`read_contents`)."""
    data = _request(data)
    fields = check(_Fields, data, "")
    config = check(_Generation, fields.generationConfig or {}, "generationConfig")
    told: list[Told] = []
    declared: list[Declared] = []
    tools = _tools(fields, told, declared)
    origins = Origins()
    messages = read_contents(fields.contents, fields.systemInstruction, origins, counting)
    check_turn(messages, declared, origins)
    choice, offered = _choice(fields, tools)
    think, thoughts, level = _thinking(config)
    generation = fields.generationConfig or {}
    flat = {k: v for k, v in data.items() if k != "generationConfig"}
    flat.update({f"generationConfig.{k}": generation[k] for k in SAMPLING if k in generation})
    top_k = flat.get("generationConfig.topK")
    if isinstance(top_k, float) and top_k.is_integer():  # (Google's SDKs type it a float)
        flat["generationConfig.topK"] = int(top_k)
    sampling, passed, withheld = engine_fields(flat, "gemini")
    if level is not None and "reasoning_effort" not in passed:
        passed["reasoning_effort"] = level
    unread = tuple(f"generationConfig.{k}" for k in generation if k not in _READ)
    settings = options(data)
    request = Request(
        messages,
        offered or None,
        tool_choice=choice,
        temperature=config.temperature,
        max_tokens=config.maxOutputTokens,
        think=think,
        sampling=sampling,
        extra=passed,
        withheld=(*withheld, *unread),
        strict=settings.get("strict", False),
        constrained=settings.get("constrained", True),
        stream=stream,
        output=_output(config),
        budget=budget or WorkBudget(),
    )
    return GeminiCall(request, model, told, thoughts)
