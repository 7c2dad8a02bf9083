"""The events a reply becomes, whichever backend or grammar produced it.

A consumer that only appends what it is given gets the reply right: text and reasoning
arrive as deltas; a call arrives as a start (its name known), argument deltas, and an end
carrying the typed call. A call that turns out not to be one (truncated, malformed) is
withdrawn with :class:`CallAbort`, and its text then follows as an ordinary text delta, so
nothing the model wrote is lost and nothing half-read is run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from .messages import ToolCall

__all__ = [
    "NOTICES",
    "TOLERANCES",
    "CallAbort",
    "CallArgsDelta",
    "CallEnd",
    "CallStart",
    "Done",
    "Event",
    "Notice",
    "NoticeCode",
    "ReasoningDelta",
    "TextDelta",
    "ToolResult",
    "ToolRun",
    "notice_codes",
    "recovered",
]

#: Every code a :class:`Notice` may carry: the one list. Clients read these (the gateway sends
#: them as ``{"code", "message"}``), so a code is a promise: :data:`NOTICES` says what each
#: means, and ``docs/notices.md`` is checked against it by a test. mypy refuses a code that
#: is not here.
NoticeCode = Literal[
    # how the turn reaches the model (the pipeline's plan)
    "tools-in-words",
    "schema-dialect",
    "no-tools",
    "tool-choice-not-enforced",
    "constrained-call",
    "constrained-output",
    "healed-schema",
    "healed-tools",
    "healed-stream-usage",
    # calls read although the reply strayed from the grammar (tolerances: strict refuses them)
    "recovered-bare-json",
    "recovered-fenced-json",
    "recovered-unclosed-tag",
    "recovered-tagged",
    "recovered-doubled-braces",
    "recovered-json-lines",
    "recovered-json-lines-cut",
    "recovered-opening-call",
    "recovered-arguments-string",
    "recovered-arguments-key",
    "recovered-attributes-ignored",
    "recovered-block-unclosed",
    "recovered-call-ended-thinking",
    "recovered-call-keys",
    "recovered-function-tag",
    "recovered-repairs",
    "recovered-section-missing",
    "recovered-unopened-call",
    "recovered-tool-calls-object",
    "recovered-trailing-call",
    "recovered-leading-call",
    "recovered-raw-controls",
    "recovered-escaped-newline",
    "recovered-self-closing",
    "recovered-json-arguments",
    "recovered-call-list",
    "recovered-json-call",
    "recovered-echoed-markup",
    "recovered-recipient",
    "recovered-block-reopened",
    "recovered-calls-one-block",
    "recovered-closer-missing",
    "recovered-bare-id",
    "recovered-misspelt-tag",
    "recovered-separator-missing",
    "recovered-list-separator",
    "recovered-python-values",
    "calls-kept-apart",
    "arguments-repaired",
    "arguments-unknown-fields",
    "pattern-not-checked",
    "check-skipped",
    # what was not passed on as a call, and why
    "arguments-invalid",
    "call-abandoned",
    "call-resent",
    "call-not-read",
    "call-without-tools",
    "undeclared-tool",
    "repeated-call",
    "calls-dropped",
    "calls-past-limit",
    "calls-after-bound",
    "ignored-tool-response",
    "directly-answer",
    # the gateway's own
    "tool-not-served",
    "field-not-honoured",
    "tokens-estimated",
    "response-not-stored",
    # what the model is given of the conversation
    "content-not-seen",
    "system-moved",
    # structured outputs
    "output-not-schema",
]

#: What each code means, in a line: the table of ``docs/notices.md``.
NOTICES: dict[NoticeCode, str] = {
    "tools-in-words": "the tools are listed in the prompt and calls read leniently (the model "
    "takes no tools, its template has no tool format, or the format is none)",
    "schema-dialect": "the tools go in another schema dialect: the model refused a schema before",
    "no-tools": "not even the tool names fit the model's window: it answers without tools",
    "tool-choice-not-enforced": "tool_choice required, but only the prompt can ask the model",
    "constrained-call": "a call was finished under a grammar of the declared tools",
    "constrained-output": "the reply was written under the grammar of the output format's schema",
    "healed-schema": "the engine refused a tool schema: sent again with plain schemas",
    "healed-tools": "the engine takes no tools: they were given in words instead",
    "healed-stream-usage": "the engine refused stream_options: sent again without it, and not "
    "asked again (its streams give no usage)",
    "recovered-bare-json": "a reply that is only a call as bare JSON was read as the call",
    "recovered-fenced-json": "a call in a code fence was read as the call",
    "recovered-unclosed-tag": "a call whose closing tag never came was read",
    "recovered-tagged": "a call in tags the engine's grammar does not read was read",
    "recovered-doubled-braces": "a call written in doubled braces was read",
    "recovered-json-lines": "several calls written one JSON object a line were read",
    "recovered-json-lines-cut": "calls as JSON lines were read; the unfinished last was dropped",
    "recovered-opening-call": "a reply opening with the call just answered was read as that call",
    "recovered-arguments-string": "arguments written as a JSON string were read as the object",
    "recovered-arguments-key": "arguments under another key than the grammar's were read",
    "recovered-attributes-ignored": "attributes in a tag the grammar has none in were read past",
    "recovered-block-unclosed": "a call block the reply never closed was read",
    "recovered-call-ended-thinking": "a call that ended an unclosed thinking block was read",
    "recovered-call-keys": "a call object with other keys than the asked ones was read",
    "recovered-function-tag": "a call written as <function=…> was read",
    "recovered-repairs": "a call in words needed its JSON repaired",
    "recovered-section-missing": "a call outside its calls section was read",
    "recovered-unopened-call": "a call written without its opening tag was read",
    "recovered-tool-calls-object": "the engine sent tool_calls as one object, not a list",
    "recovered-trailing-call": "a call that is the reply's last block, after prose, was read; "
    "the prose stays content",
    "recovered-leading-call": "a call that opens the reply, text after it, was read; the "
    "text stays content",
    "recovered-raw-controls": "a call whose JSON strings held raw line breaks or tabs was read",
    "recovered-escaped-newline": "a call whose tags were parted by an escaped newline (a "
    "backslash and n) instead of a line break was read",
    "recovered-self-closing": "a call written as one self-closing tag, with no arguments, was read",
    "recovered-json-arguments": "a call whose arguments came as one JSON object, not its "
    "grammar's argument tags, was read",
    "recovered-call-list": "calls written as a JSON list where their framing holds one call "
    "object were read",
    "recovered-json-call": "a call written as a JSON object where its family's tags write "
    "its name was read",
    "recovered-echoed-markup": "a closer of the family's written again right after its calls "
    "was dropped",
    "recovered-recipient": "a call block in a message its header did not address to a tool "
    "was read, its invokes naming the tools",
    "recovered-block-reopened": "calls whose block was opened again before it closed were "
    "read as one block",
    "recovered-calls-one-block": "several calls written in one framing that holds one call "
    "were read",
    "recovered-closer-missing": "a call whose own closing word was left out where its "
    "block's closing word came was read",
    "recovered-bare-id": "a call whose id lacks its tool's namespace, or names no tool, was "
    "read: the tool it names, or the one declared tool its arguments fit",
    "recovered-misspelt-tag": "a call with a damaged tag (a closing or wrapper tag misspelt, "
    "cut short) was read",
    "recovered-separator-missing": "a call whose name was not followed by the separator token "
    "its family writes after a name was read",
    "recovered-list-separator": "calls listed with the separator left out between two were read",
    "recovered-python-values": "a Python call whose values were written as its template "
    "writes them, not as literals (unquoted text, a quote left unescaped, a comma left out), "
    "was read",
    "calls-kept-apart": "the engine streamed two calls under one index: kept apart",
    "arguments-repaired": "the arguments were repaired or typed by the schema (each repair named)",
    "arguments-unknown-fields": "fields the tool's schema does not list were dropped",
    "pattern-not-checked": "a pattern of the tool's schema cannot be matched in linear time (a "
    "back-reference, a look-around, too long, too large a program): the arguments were not "
    "checked against it",
    "check-skipped": "checking the arguments (or the structured output) against the schema "
    "would take more work than the request's budget: it passes unchecked (with strict: "
    "refused)",
    "arguments-invalid": "the arguments do not fit the schema: the call goes as the model wrote "
    "it, with the explanation a model can act on",
    "call-abandoned": "a call the model began was not one: its text follows as text",
    "call-resent": "a streamed call whose arguments changed after they went out was withdrawn "
    "and sent again whole",
    "call-not-read": "call markup that could not be read as a call stays text; nothing runs",
    "call-without-tools": "a reply written as a call on a turn that offered no tools stays text",
    "undeclared-tool": "a call to a tool the request did not declare was not passed on",
    "repeated-call": "a call repeating one already made was not passed on",
    "calls-dropped": "parallel_tool_calls is false: calls after the first were not passed on",
    "calls-past-limit": "the reply went on past the calls one reply passes on (128 by default): "
    "it was closed after them",
    "calls-after-bound": "the loop's last turn offered no tools: its calls were not run",
    "ignored-tool-response": "a tool result the model wrote itself was not read as one",
    "directly-answer": "the model chose to answer in text, not with a tool",
    "tool-not-served": "a tool of a kind the gateway does not serve was left out",
    "tokens-estimated": "the engine does not count tokens for the gateway: the count is an "
    "estimate (4 characters a token)",
    "field-not-honoured": "a field of the request the engine cannot honour (a sampling field, "
    "an engine's own field) was not used; the notice names it",
    "response-not-stored": "the response could not be stored for previous_response_id",
    "content-not-seen": "an image, document or sound the model cannot read was replaced by a "
    "short placeholder that says what it was",
    "system-moved": "a system message the model's template takes only at the start was given "
    "to it at the start, or in the next user turn, marked as a system note",
    "output-not-schema": "the reply is not JSON that fits the requested output format (with "
    "strict, an error)",
}

#: The codes that name a tolerance: something read although the model or the engine strayed
#: from its grammar or its wire format. With ``strict`` each is an error instead, whichever
#: layer met it (see :func:`toolwire.pipeline.reply.reply`).
TOLERANCES: frozenset[NoticeCode] = frozenset(
    code
    for code in get_args(NoticeCode)
    if code.startswith("recovered-") or code in ("calls-kept-apart", "arguments-repaired")
)


_RECOVERED: dict[str, NoticeCode] = {
    code.removeprefix("recovered-"): code for code in NOTICES if code.startswith("recovered-")
}


def notice_codes() -> tuple[NoticeCode, ...]:
    """Every notice code, in the list's order."""
    return get_args(NoticeCode)


def recovered(shape: str) -> NoticeCode:
    """The code of a call recovered from ``shape`` (``bare-json``, ``fenced-json``…)."""
    code = _RECOVERED.get(shape)
    if code is None:
        raise ValueError(f"no notice code for a call recovered from {shape!r}")
    return code


@dataclass(frozen=True)
class TextDelta:
    """Reply text meant for the user."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """Text the model wrote inside its thinking markers; never read for calls."""

    text: str


@dataclass(frozen=True)
class CallStart:
    """A call opened and its name is known. ``index`` counts calls within one reply."""

    index: int
    id: str
    name: str


@dataclass(frozen=True)
class CallArgsDelta:
    """More of the call's arguments as JSON text; the pieces concatenate."""

    index: int
    text: str


@dataclass(frozen=True)
class CallEnd:
    """The call is complete and checked against its family's grammar.

    At the reply pipeline's end each call is typed once by its tool's schema
    (:func:`toolwire.pipeline.end.prepare_call`): ``arguments`` is then the JSON text a
    client runs the tool with, ``call.arguments`` the typed object, and ``invalid`` the
    explanation a model can act on when they do not fit (then ``arguments`` is what the
    model wrote). A call not yet through the pipeline has ``arguments`` None.
    """

    index: int
    call: ToolCall
    arguments: str | None = None
    invalid: str | None = None


@dataclass(frozen=True)
class CallAbort:
    """A started call was not a call after all; its text follows as a :class:`TextDelta`."""

    index: int
    id: str
    reason: str


@dataclass(frozen=True)
class Notice:
    """Something the user should know that is not part of the reply (e.g. a recovery):
    ``code`` is one of :data:`NoticeCode`."""

    code: NoticeCode
    message: str


@dataclass(frozen=True)
class Done:
    """The model's turn ended: why (``stop``, ``tool_calls``, ``length``…) and the usage;
    ``stop_sequence``: the client's stop text that ended it, when one did."""

    finish_reason: str
    usage: dict[str, int] | None = None
    stop_sequence: str | None = None


@dataclass(frozen=True)
class ToolRun:
    """The loop is about to run a call: its arguments are typed and checked."""

    call: ToolCall


@dataclass(frozen=True)
class ToolResult:
    """What a call gave back, as the model will read it.

    ``status`` is ``ok``, or why it failed: ``invalid`` (arguments), ``unknown-tool``,
    ``denied`` (read-only), ``error`` (the tool raised), ``unavailable`` (try later),
    ``timeout`` or ``unknown-outcome`` (a side effect may or may not have happened).
    """

    call_id: str
    name: str
    content: str
    status: str = "ok"


Event = (
    Done
    | ToolRun
    | ToolResult
    | TextDelta
    | ReasoningDelta
    | CallStart
    | CallArgsDelta
    | CallEnd
    | CallAbort
    | Notice
)
