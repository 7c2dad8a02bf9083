"""The Chat Completions request, declared: a pydantic model of the request, and a pydantic
TypedDict for each object inside it, all strict (nothing coerced: ``"stream": "yes"`` is
refused, not read as true; ``1.0`` is not a whole number) and closed (a field not declared
is refused). Unions are picked by a tag (the
``role``, a part's ``type``, the JSON kind of the value) so that a wrong value gets one
error naming its field, not one per member tried.

What each field gets:

* **Honoured:** ``messages`` (roles ``system``, ``developer``, ``user``, ``assistant``,
  ``tool``; content a string or a list of content parts of the kinds the role takes),
  ``tools`` (function tools; each name unique and ``parameters`` a JSON schema of an
  object, as every API checks them: :func:`toolwire.server.validate.check_turn`),
  ``tool_choice``, ``parallel_tool_calls``, ``stream``, ``temperature``, ``max_tokens`` /
  ``max_completion_tokens``, ``response_format`` (``text``; ``json_object``; ``json_schema``
  with ``name``, ``schema``, ``strict``: a structured output, see
  :mod:`toolwire.pipeline.structured`), and toolwire's own ``toolwire: {strict, constrained}``.
  ``model`` is checked and answered by the gateway's own model.
* **Passed to the engine** (:mod:`toolwire.server.passing`, the one rule for every API):
  the sampling fields (``top_p``, ``top_k``, ``min_p``, ``seed``, ``stop``, the penalties,
  ``logit_bias``: checked there), and, checked here by their type, ``logprobs``,
  ``top_logprobs``, ``user``, ``metadata``, ``store``, ``service_tier``,
  ``prompt_cache_key``, ``safety_identifier``, ``reasoning_effort``, ``verbosity``,
  ``prediction``; and any field not listed here, as sent (``chat_template_kwargs``: the
  engine decides). ``stream_options`` and ``modalities: ["text"]`` are the gateway's.
* **Refused**, because the reply could not be what the client asked for: ``n`` other than 1,
  the deprecated ``functions`` / ``function_call`` (send ``tools`` / ``tool_choice``),
  ``audio`` and ``modalities`` with ``audio``, ``web_search_options``.

A message may carry ``name``; an assistant message also what clients echo back from a
reply (``refusal``, ``annotations``, ``audio``, ``reasoning_content``, ``thinking``, a null
``function_call``). Every tool message must answer a call of an earlier assistant message by
its id, each call once; each call's id is unique (:func:`toolwire.server.validate.check_turn`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    TypeAdapter,
    field_validator,
    with_config,
)
from pydantic_core import PydanticCustomError
from typing_extensions import NotRequired, TypedDict

from ..tools import _NAME as _TOOL_NAME
from .output import FormatName, output_schema

__all__ = ["MAX_DEPTH", "MAX_TOKENS", "MESSAGES", "TAG", "ChatCompletionsRequest"]

#: Free-form values (a tool's ``parameters``, a message's ``annotations``) nested deeper than
#: this are refused: they are copied and rendered recursively further on. Everything else
#: has the shape its model declares, a few levels at most.
MAX_DEPTH = 64
#: The largest ``max_tokens`` taken (a bound, not a promise of the model's context).
MAX_TOKENS = 10**9

#: Prefix of the tags that pick a union's member; they appear in pydantic's error locations,
#: to be left out of the paths the client reads.
TAG = "\x00"


def _kind(value: Any) -> str | None:
    """The JSON kind of a value, for unions picked by kind rather than tried in turn."""
    for kind, types in (("string", str), ("list", list), ("object", dict)):
        if isinstance(value, types):
            return TAG + kind
    return None


def _by_kind(what: str, **members: Any) -> Any:
    """A union picked by the value's JSON kind (``string=str, list=list[Part]``): one clear
    error when the kind is wrong, the member's own errors otherwise."""
    tagged = tuple(Annotated[tp, Tag(TAG + kind)] for kind, tp in members.items())
    return Annotated[
        Union[tagged],  # noqa: UP007 - a union built from a tuple of types
        Discriminator(_kind, custom_error_type="wrong_kind", custom_error_message=what),
    ]


def _by_field(field: str, what: str, **members: Any) -> Any:
    """A union of objects picked by one string field (``role``, ``type``)."""

    def pick(value: Any) -> str | None:
        tag = value.get(field) if isinstance(value, dict) else None
        return TAG + tag if isinstance(tag, str) and tag in members else None

    tagged = tuple(Annotated[tp, Tag(TAG + name)] for name, tp in members.items())
    return Annotated[
        Union[tagged],  # noqa: UP007
        Discriminator(pick, custom_error_type=f"wrong_{field}", custom_error_message=what),
    ]


#: Every object: strict types (nothing coerced), unknown fields refused. The objects inside
#: a request are TypedDicts, checked into plain dicts: five times faster than a model
#: instance per message, which counts for a body of 200,000 messages.
_STRICT = ConfigDict(strict=True, extra="forbid")
_strict = with_config(_STRICT)


def _refused(why: str) -> Callable[[Any], Any]:
    """A validator for a field that is refused whenever it is given and not null."""

    def check(value: Any) -> Any:
        if value is not None:
            raise PydanticCustomError("refused", why)
        return value

    return check


def _shallow(value: Any) -> Any:
    """A free-form value nested at most :data:`MAX_DEPTH` levels."""
    level = [value]
    for _ in range(MAX_DEPTH):
        level = [
            inner
            for item in level
            for inner in (item.values() if isinstance(item, dict) else item)
            if isinstance(inner, (dict, list))
        ]
        if not level:
            return value
    raise PydanticCustomError(
        "too_deep", "is nested deeper than {limit} levels", {"limit": MAX_DEPTH}
    )


NonEmpty = Annotated[str, StringConstraints(min_length=1)]
ToolName = Annotated[str, StringConstraints(pattern=_TOOL_NAME.pattern)]


@_strict
class TextPart(TypedDict):
    type: Literal["text"]
    text: str


@_strict
class RefusalPart(TypedDict):
    type: Literal["refusal"]
    refusal: str


@_strict
class ImageUrl(TypedDict):
    url: str
    detail: NotRequired[Literal["auto", "low", "high"] | None]


@_strict
class ImagePart(TypedDict):
    type: Literal["image_url"]
    image_url: ImageUrl


@_strict
class InputAudio(TypedDict):
    data: str
    format: Literal["wav", "mp3"]


@_strict
class AudioPart(TypedDict):
    type: Literal["input_audio"]
    input_audio: InputAudio


@_strict
class FileData(TypedDict):
    file_data: NotRequired[str | None]
    file_id: NotRequired[str | None]
    filename: NotRequired[str | None]


@_strict
class FilePart(TypedDict):
    type: Literal["file"]
    file: FileData


def _parts(**kinds: Any) -> Any:
    names = ", ".join(kinds)
    part = _by_field("type", f"a content part here is an object whose type is {names}", **kinds)
    return _by_kind("must be a string or a list of content parts", string=str, list=list[part])  # type: ignore[valid-type]


# Unions built at import (each picked by a tag, for one clear error); typed plainly for mypy.
if TYPE_CHECKING:
    TextContent = str | list[Any]
    UserContent = str | list[Any]
    AssistantContent = str | list[Any]
else:
    TextContent = _parts(text=TextPart)
    UserContent = _parts(text=TextPart, image_url=ImagePart, input_audio=AudioPart, file=FilePart)
    AssistantContent = _parts(text=TextPart, refusal=RefusalPart)


@_strict
class SystemMessage(TypedDict):
    role: Literal["system"]
    content: TextContent
    name: NotRequired[str | None]


@_strict
class DeveloperMessage(TypedDict):
    role: Literal["developer"]
    content: TextContent
    name: NotRequired[str | None]


@_strict
class UserMessage(TypedDict):
    role: Literal["user"]
    content: UserContent
    name: NotRequired[str | None]


@_strict
class CalledFunction(TypedDict):
    name: NonEmpty
    #: The arguments as the JSON text the model wrote (OpenAI's wire: a string).
    arguments: str


@_strict
class ToolCallParam(TypedDict):
    id: NotRequired[str | None]
    type: NotRequired[Literal["function"]]
    function: CalledFunction


@_strict
class AssistantAudio(TypedDict):
    id: str


@_strict
class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: NotRequired[AssistantContent | None]
    name: NotRequired[str | None]
    tool_calls: NotRequired[list[ToolCallParam] | None]
    refusal: NotRequired[str | None]
    audio: NotRequired[AssistantAudio | None]
    annotations: NotRequired[Annotated[list[dict[str, Any]], AfterValidator(_shallow)] | None]
    reasoning_content: NotRequired[str | None]
    thinking: NotRequired[str | None]
    function_call: NotRequired[
        Annotated[Any, AfterValidator(_refused("is deprecated and not served: send tool_calls"))]
    ]


@_strict
class ToolMessage(TypedDict):
    role: Literal["tool"]
    content: TextContent
    tool_call_id: str
    name: NotRequired[str | None]


if TYPE_CHECKING:
    Message = SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage
else:
    Message = _by_field(
        "role",
        "must be a message object whose role is system, developer, user, assistant or tool",
        system=SystemMessage,
        developer=DeveloperMessage,
        user=UserMessage,
        assistant=AssistantMessage,
        tool=ToolMessage,
    )


#: The messages alone, for a request checked in slices (see ``validate_chat_request``).
MESSAGES: TypeAdapter[list[Any]] = TypeAdapter(list[Message])


@_strict
class FunctionDefinition(TypedDict):
    name: ToolName
    description: NotRequired[str | None]
    parameters: NotRequired[Annotated[dict[str, Any], AfterValidator(_shallow)] | None]
    strict: NotRequired[bool | None]


@_strict
class ToolParam(TypedDict):
    type: NotRequired[Literal["function"]]
    function: FunctionDefinition


@_strict
class NamedFunction(TypedDict):
    name: NonEmpty


@_strict
class NamedToolChoice(TypedDict):
    type: Literal["function"]
    function: NamedFunction


if TYPE_CHECKING:
    ToolChoice = Literal["auto", "none", "required"] | NamedToolChoice
else:
    ToolChoice = _by_kind(
        "must be auto, none, required or a named function {type: function, function: {name}}",
        string=Literal["auto", "none", "required"],
        object=NamedToolChoice,
    )


@_strict
class StreamOptions(TypedDict):
    include_usage: NotRequired[bool | None]
    include_obfuscation: NotRequired[bool | None]


@_strict
class Prediction(TypedDict):
    type: Literal["content"]
    content: TextContent


@_strict
class TextFormat(TypedDict):
    type: Literal["text"]


@_strict
class JsonObjectFormat(TypedDict):
    type: Literal["json_object"]


@_strict
class JsonSchemaSpec(TypedDict):
    name: FormatName
    description: NotRequired[str | None]
    schema: NotRequired[Annotated[dict[str, Any], AfterValidator(output_schema)] | None]
    strict: NotRequired[bool | None]


@_strict
class JsonSchemaFormat(TypedDict):
    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


if TYPE_CHECKING:
    ResponseFormat = TextFormat | JsonObjectFormat | JsonSchemaFormat
else:
    ResponseFormat = _by_field(
        "type",
        "must be an object whose type is text, json_object or json_schema",
        text=TextFormat,
        json_object=JsonObjectFormat,
        json_schema=JsonSchemaFormat,
    )


@_strict
class ToolwireOptions(TypedDict):
    """The request's ``toolwire`` extension."""

    strict: NotRequired[bool | None]
    constrained: NotRequired[bool | None]


Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]


class ChatCompletionsRequest(BaseModel):
    """Every field of a Chat Completions request, as the gateway takes it (module doc); a
    field it does not declare is the engine's."""

    model_config = ConfigDict(strict=True, extra="allow")

    messages: Annotated[list[Message], Field(min_length=1)]
    model: str | None = None
    tools: list[ToolParam] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    stream: bool | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    max_tokens: Tokens | None = None
    max_completion_tokens: Tokens | None = None
    n: int | None = None
    toolwire: ToolwireOptions | None = None
    # passed to the engine (the sampling fields are checked by toolwire.server.passing)
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    user: str | None = None
    metadata: Annotated[dict[str, str], Field(max_length=16)] | None = None
    store: bool | None = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] | None = None
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    prediction: Prediction | None = None
    stream_options: StreamOptions | None = None
    modalities: list[Literal["text"]] | None = None
    response_format: ResponseFormat | None = None
    # refused when given
    functions: Any = None
    function_call: Any = None
    audio: Any = None
    web_search_options: Any = None

    @field_validator("n")
    @classmethod
    def _one_choice(cls, value: int | None) -> int | None:
        if value is not None and value != 1:
            raise PydanticCustomError("one_choice", "must be 1: the gateway gives one choice")
        return value

    _no_functions = field_validator("functions", "function_call")(
        _refused("is deprecated and not served: send tools and tool_choice")
    )
    _no_audio = field_validator("audio")(_refused("is not served: the gateway answers in text"))
    _no_search = field_validator("web_search_options")(
        _refused("is not served: the gateway does not search the web")
    )
