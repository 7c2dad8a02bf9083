"""Lessons a client cannot teach: whether a refusal over tools is kept for the model.

A refusal that heals a request (:mod:`toolwire.pipeline.reply`) says something of that
request; whether it says something of the model too is decided here, once. Nothing a
client sends teaches: a provider's words may be the client's own words quoted back (a tool
described as "does not support tools"), and even its machine error code (``sure``: see
:mod:`toolwire.schemas.refusals`) describes the *request*, not the model — an honest
client's array without ``items`` is OpenAI's ``invalid_function_parameters``, a
``tool_choice`` the model does not take its ``unsupported_value``. The code may heal that
request; to learn, the gateway asks the model itself: a probe, a minimal request of its own
— a fixed toolwire tool (:data:`PROBE_TOOL`; for a refused schema, one whose schema uses the
keywords the strict dialect leaves out), a fixed message, one token at most, nothing of any
client's. Refused the same way, the lesson stands (source ``probe``); accepted, nothing is
learned (the client's request was the cause). At most one probe of a model is in flight at a
time, and none sooner than the memory's ``probe_every`` after the last
(:class:`~toolwire.pipeline.memory.ProbeGate`); a refusal met meanwhile heals its own
request only.

The transport sends the probe as it sends any turn (:meth:`Transport.prepare`,
:meth:`Transport.send`); what its answer means is decided here.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from .. import events as ev
from ..errors import BackendError
from ..schemas.refusals import Refusal, read_refusal
from .request import Plan, Request

if TYPE_CHECKING:
    from .transport import Transport

__all__ = ["PROBE_MESSAGE", "PROBE_TOOL", "probe", "probe_request", "settle"]

#: The one message a probe sends.
PROBE_MESSAGE = "Say ok."
_NAME = "toolwire_probe"
_DESCRIPTION = "A fixed tool the toolwire gateway offers to learn whether a model takes tools."
#: The probe's tool for "takes no tools": a schema every dialect takes as it is.
PROBE_TOOL: Mapping[str, Any] = {
    "type": "function",
    "function": {
        "name": _NAME,
        "description": _DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string", "description": "One word."}},
            "required": ["word"],
        },
    },
}
#: The probe's tool for a refused schema: the keywords the strict dialect leaves out.
_KEYWORD_TOOL: Mapping[str, Any] = {
    "type": "function",
    "function": {
        "name": _NAME,
        "description": _DESCRIPTION,
        "parameters": {
            "type": "object",
            "title": "probe",
            "properties": {
                "word": {"anyOf": [{"type": "string", "pattern": "^[a-z]+$"}, {"type": "null"}]},
                "when": {"type": "string", "format": "date-time", "default": "now"},
                "count": {"type": "integer", "minimum": 0, "maximum": 9},
                "kind": {"const": "probe"},
                "item": {"$ref": "#/$defs/item"},
            },
            "$defs": {
                "item": {
                    "type": "object",
                    "properties": {"n": {"type": "integer"}},
                    "additionalProperties": False,
                }
            },
            "required": ["word"],
            "additionalProperties": False,
        },
    },
}


def probe_request(kind: str) -> Request:
    """The probe for a refusal of ``kind`` (``schema`` or ``tools``): fixed, and one token."""
    tool = _KEYWORD_TOOL if kind == "schema" else PROBE_TOOL
    return Request(
        [{"role": "user", "content": PROBE_MESSAGE}],
        [tool],
        max_tokens=1,
        temperature=0.0,
        constrained=False,
    )


async def probe(transport: Transport, kind: str, dialect: str) -> bool | None:
    """Does the model refuse the probe for ``kind`` the same way? True: refused so; False:
    accepted (it said something); None: another failure, which tells nothing."""
    request = probe_request(kind)
    prepared = transport.prepare(request, Plan("native", dialect=dialect))
    try:
        async with aclosing(transport.send(prepared)) as events:
            async for event in events:
                if not isinstance(event, ev.Notice):
                    return False  # it answered: the probe's tools were taken
    except BackendError as exc:
        refusal = read_refusal(exc)  # the words are about toolwire's own request here
        return True if refusal is not None and refusal.kind == kind else None
    return False


async def settle(transport: Transport, refusal: Refusal, dialect: str) -> str:
    """Whether ``refusal`` teaches the model a lesson (learning it when it does), and words
    for the healing notice that say which. ``dialect``: the one the refused request was in.
    Only the probe teaches, whether the refusal came with a machine code or in words: the
    code was the provider's answer to the client's request (see the module)."""
    memory = transport.memory
    key = (transport.endpoint, transport.model)
    what: dict[str, Any] = {"dialect": "strict"} if refusal.kind == "schema" else {"words": True}
    if not memory.probes.take(key):
        return "for this request only (the model was probed lately, or is being probed)"
    try:
        refused = await probe(transport, refusal.kind, dialect)
    finally:
        memory.probes.give_back(key)
    if refused:
        lesson = memory.learn(*key, **what, source="probe")
        return f"later requests too: {lesson.origin()}"
    if refused is False:
        return (
            "for this request only: a probe the gateway sent was accepted, so this request's "
            "own tools were the cause"
        )
    return "for this request only: a probe the gateway sent did not tell"
