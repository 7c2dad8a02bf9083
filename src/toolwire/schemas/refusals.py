"""What a provider's refusal over tools means, read from its own words.

``schema``: a keyword of a tool schema was refused — send again once in the strict dialect.
``tools``: the model takes no tools at all — give it the tools in words. Anything else is
not about tools (None). An unknown model counts as able until it says otherwise.
:func:`refused_media`: the engine takes no images or files — give them as placeholders.
"""

from __future__ import annotations

import re

from ..errors import BackendError

__all__ = ["classify_refusal", "refused_media"]

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


#: An engine that takes no images or files (a text model behind an OpenAI-compatible server:
#: llama-server without its projector, vLLM, LM Studio, OpenAI's text models).
_MEDIA = re.compile(
    r"image input is not supported|mmproj|not a multi-?modal model"
    r"|does not support (?:images?|vision|multi-?modal|image input|file input|files?)\b"
    r"|(?:images?|vision|multi-?modal|file) (?:inputs? )?(?:is |are )?not supported"
    r"|image_url is only supported|(?:image|file) content is not supported",
    re.I,
)


def refused_media(error: BackendError) -> bool:
    """Did the engine refuse the request for its images or files?"""
    if error.status and error.status not in (400, 404, 415, 422, 500):
        return False
    return _MEDIA.search(f"{error} {error.body}") is not None


def classify_refusal(error: BackendError) -> str | None:
    """``"schema"``, ``"tools"`` or None for a provider's error."""
    if error.status and error.status not in (400, 404, 422, 500):
        return None
    text = f"{error} {error.body}"
    if _TOOLS.search(text):
        return "tools"
    if _SCHEMA.search(text):
        return "schema"
    return None
