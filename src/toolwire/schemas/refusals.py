"""What a provider's refusal over tools means, and how sure we can be of it.

``schema``: a keyword of a tool schema was refused — send again once in the strict dialect.
``tools``: the model takes no tools at all — give it the tools in words. Anything else is
not about tools (None). An unknown model counts as able until it says otherwise.
:func:`refused_media`: the engine takes no images or files — give them as placeholders.

A refusal is read into a :class:`Refusal` (its kind, and whether it is ``sure``). Free text
is never sure: providers fill their error messages with the client's own input (a tool's
description, a schema quoted back), so a client can make any message say "does not support
tools". A refusal is sure only when decided from fields a provider sets itself and a
request cannot fill: the HTTP status together with a machine code in the JSON error body.
Sure or not, a refusal heals the request that met it and nothing else: even a code
describes that request, not the model (a lesson waits for a probe,
:mod:`toolwire.pipeline.lessons`). The codes read (kept small):

``400 {"error": {"code": "invalid_function_parameters", ...}}``
    OpenAI (and the servers that copy its errors: Azure OpenAI, LiteLLM) refusing a tool's
    ``parameters`` schema; ``param`` is ``tools[N].function.parameters`` → ``schema``.
``400 {"error": {"code": "unsupported_parameter" | "unsupported_value", "param": "tools"}}``
    OpenAI refusing ``tools`` (or ``tool_choice``) for a model without them → ``tools``.
``400 {"error": {"code": "unsupported_parameter", "param": "stream_options"}}`` and
``422 {"detail": [{"type": "extra_forbidden", "loc": ["body", "stream_options"]}]}``
    a server refusing ``stream_options`` (OpenAI; a strict pydantic request model such as
    vLLM's or a FastAPI proxy's): :func:`refuses_field`.

Ollama (``{"error": "... does not support tools"}``), OpenRouter (``{"error": {"code":
404, "message": "No endpoints found that support tool use"}}``), vLLM (``{"code": 400,
"message": ...}``) and Groq give only a status and text for these: their refusals are
never sure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import BackendError

__all__ = ["Refusal", "classify_refusal", "read_refusal", "refused_media", "refuses_field"]

_TOOLS = re.compile(
    r"does not support tools|doesn't support tools|no endpoints found that support tool"
    r"|tools? (?:are|is) not supported|does not support (?:function|tool) call"
    r"|tool(?:s| use| calling)? (?:is )?not (?:enabled|available) for this model"
    r"|unsupported (?:parameter|field):? '?tools'?",
    re.I,
)
_SCHEMA = re.compile(
    r"invalid (?:json )?schema|schema (?:is )?invalid|unsupported (?:schema )?keyword"
    r"|invalid_function_parameters|function\.parameters|input_schema"
    r"|unknown name \"[^\"]+\" at 'tools|not supported in (?:the )?schema"
    r"|\$ref|additionalProperties|anyOf",
    re.I,
)

#: The statuses a refusal over tools comes with.
_STATUSES = (400, 404, 422, 500)
#: An error body longer than this is not read for machine fields (a refusal's is small).
_MAX_BODY = 65536
#: OpenAI's codes for a refused tool schema, and for a refused parameter.
_SCHEMA_CODES = frozenset({"invalid_function_parameters"})
_PARAM_CODES = frozenset({"unsupported_parameter", "unsupported_value"})


#: An engine that takes no images or files (a text model behind an OpenAI-compatible server:
#: llama-server without its projector, vLLM, LM Studio, OpenAI's text models).
_MEDIA = re.compile(
    r"image input is not supported|mmproj|not a multi-?modal model"
    r"|does not support (?:images?|vision|multi-?modal|image input|file input|files?)\b"
    r"|(?:images?|vision|multi-?modal|file) (?:inputs? )?(?:is |are )?not supported"
    r"|image_url is only supported|(?:image|file) content is not supported",
    re.I,
)


@dataclass(frozen=True)
class Refusal:
    """A refusal over tools: its kind, and whether it was decided from machine fields."""

    kind: Literal["schema", "tools"]
    #: Decided from the status and a machine code (see the module), not from free text.
    sure: bool = False
    #: The machine code it was decided from, when sure.
    code: str | None = None


def refused_media(error: BackendError) -> bool:
    """Did the engine refuse the request for its images or files?"""
    if error.status and error.status not in (400, 404, 415, 422, 500):
        return False
    return _MEDIA.search(f"{error} {error.body}") is not None


def classify_refusal(error: BackendError) -> str | None:
    """``"schema"``, ``"tools"`` or None for a provider's error (see :func:`read_refusal`)."""
    refusal = read_refusal(error)
    return refusal.kind if refusal is not None else None


def read_refusal(error: BackendError) -> Refusal | None:
    """What ``error`` says of the request's tools: a sure refusal from its machine fields,
    else an unsure one from its words, else None."""
    if error.status and error.status not in _STATUSES:
        return None
    sure = _from_fields(error)
    if sure is not None:
        return sure
    text = f"{error} {error.body}"
    if _TOOLS.search(text):
        return Refusal("tools")
    if _SCHEMA.search(text):
        return Refusal("schema")
    return None


def refuses_field(error: BackendError, name: str) -> bool:
    """Is ``error`` surely a refusal of the top-level request field ``name``: OpenAI's
    ``unsupported_parameter`` code naming it as ``param``, or a pydantic 422 whose
    ``extra_forbidden`` entry is at ``["body", name]``? (Not its words: see the module.)"""
    if error.status == 400:
        fields = _error_fields(error)
        return fields.get("code") in _PARAM_CODES and fields.get("param") == name
    if error.status == 422:
        data = _body_json(error)
        detail = data.get("detail") if isinstance(data, dict) else None
        return isinstance(detail, list) and any(
            isinstance(entry, dict)
            and entry.get("type") == "extra_forbidden"
            and entry.get("loc") == ["body", name]
            for entry in detail
        )
    return False


def _from_fields(error: BackendError) -> Refusal | None:
    """A sure refusal from the status and the error's ``code`` and ``param``, or None."""
    if error.status != 400:
        return None
    fields = _error_fields(error)
    code, param = fields.get("code"), fields.get("param")
    if not isinstance(code, str):
        return None
    if code in _SCHEMA_CODES:
        return Refusal("schema", sure=True, code=code)
    if code in _PARAM_CODES and param in ("tools", "tool_choice"):
        return Refusal("tools", sure=True, code=code)
    return None


def _error_fields(error: BackendError) -> dict[str, Any]:
    """The ``error`` object of an OpenAI-style error body (empty when there is none)."""
    data = _body_json(error)
    inner = data.get("error") if isinstance(data, dict) else None
    return inner if isinstance(inner, dict) else {}


def _body_json(error: BackendError) -> Any:
    """The error body as JSON, or None (too long, or not JSON)."""
    body = error.body
    if not body or len(body) > _MAX_BODY:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None
