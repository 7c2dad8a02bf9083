"""What a provider's refusal over tools means, read from its own words.

``schema``: a keyword of a tool schema was refused — send again once in the strict dialect.
``tools``: the model takes no tools at all — give it the tools in words. Anything else is
not about tools (None). An unknown model counts as able until it says otherwise.
"""

from __future__ import annotations

import re

from ..errors import BackendError

__all__ = ["classify_refusal"]

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
