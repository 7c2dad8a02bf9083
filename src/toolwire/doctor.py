"""Will tool calling work with this model? A check-up of its chat template, in plain words.

Detection (:func:`~toolwire.formats.detect.detect_format`) names a family from a probe call
and its proof on two (a family refuted there, ``Detection.unproven``, is still the one the
doctor checks, to say why). The doctor goes further, the way a user's first real request
would: it has the template write TWO parallel calls whose arguments hold a string with a
quote and a newline, an integer and a boolean; reads them back in the detected family's
grammar; types them by the tools' schemas (the one way toolwire types arguments); and renders
a whole tool conversation to see that the tools and the tool's result reach the prompt. Each
finding is one :class:`Check`; the :class:`Report` passes only when the round trip holds
exactly.

Everything here is pure: a template in, a report out. A template that refuses to render is
a failed check carrying the template's own message, never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .arguments import prepare_arguments
from .errors import ArgumentsError, LimitError, TemplateError
from .formats.base import Family, ParseResult
from .formats.detect import assistant_text, detect_format
from .formats.registry import get_family
from .messages import ToolCall
from .prompted import tools_in_words, transcript_in_words
from .templates import ChatTemplate

__all__ = ["DOCTOR_CALLS", "DOCTOR_TOOLS", "Check", "Report", "diagnose"]


def _tool(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-shaped tool whose first property is required."""
    parameters = {"type": "object", "properties": properties, "required": list(properties)[:1]}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


#: The tools the doctor offers: each takes a string, an integer and a boolean.
DOCTOR_TOOLS: list[dict[str, Any]] = [
    _tool(
        "get_weather",
        "Get the weather forecast for a city.",
        {
            "city": {"type": "string", "description": "The city's name."},
            "days": {"type": "integer", "description": "How many days ahead."},
            "metric": {"type": "boolean", "description": "Celsius rather than Fahrenheit."},
        },
    ),
    _tool(
        "send_note",
        "Send a short note to the user's phone.",
        {
            "text": {"type": "string", "description": "What the note says."},
            "copies": {"type": "integer", "description": "How many times to send it."},
            "urgent": {"type": "boolean", "description": "Ring the phone."},
        },
    ),
]
#: The two parallel calls the template is asked to write; the note's text holds a quote and
#: a newline, the characters a grammar most often mangles.
DOCTOR_CALLS: tuple[ToolCall, ...] = (
    ToolCall("a1b2c3d4e", "get_weather", {"city": "Paris", "days": 3, "metric": True}),
    ToolCall(
        "f5g6h7i8j",
        "send_note",
        {"text": 'Take an umbrella, "just in case".\nSee you at 6.', "copies": 2, "urgent": False},
    ),
)
_SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in DOCTOR_TOOLS}

_SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
_USER = {
    "role": "user",
    "content": "What's the weather in Paris for the next 3 days? And send me a note about it.",
}
#: What the tool answers in the whole conversation: it must reach the prompt.
_RESULT = "sunny-and-mild"
_ANSWER = "Sunny and mild for three days."
_FOLLOW_UP = "Thanks! And in Lyon?"
#: The context a local model gets by default (``--ctx``): enough for the tools in full words.
_WORDS_CONTEXT = 4096
#: ``none`` means: calls are read as text, and tools are offered in words.
_NO_FAMILY = (
    "no family reads this template's calls: its calls will be read as text; "
    "tools will be offered in words (the tool format 'none')"
)


@dataclass(frozen=True)
class Check:
    """One finding: a short name, whether it holds, and what it means for the user.

    A check that is not ``required`` is advice: the calls still round-trip without it (a
    template that never describes the tools, say), so it does not decide the verdict.
    """

    name: str
    ok: bool
    message: str
    required: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "required": self.required,
            "message": self.message,
        }


@dataclass(frozen=True)
class Report:
    """Every check, and the verdict: ``ok`` only when every required check holds, that is
    when the template's own calls are read back exactly."""

    template: str
    format: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks if c.required)

    @property
    def verdict(self) -> str:
        """One sentence: will tool calling work, and if not, the first reason why."""
        if self.ok:
            advice = [c.name for c in self.checks if not c.ok]
            but = f" (but see: {', '.join(advice)})" if advice else ""
            return f"tool calling works with this template: calls are read as {self.format}{but}"
        if self.format == "none":
            return (
                "no tool calling in this template's own format: toolwire will offer the tools "
                "in words and read calls from the reply's text"
            )
        first = next(c for c in self.checks if c.required and not c.ok)
        return f"tool calling will not work as the template means it: {first.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "template": self.template,
            "format": self.format,
            "ok": self.ok,
            "verdict": self.verdict,
            "checks": [c.to_json() for c in self.checks],
        }


def _assistant(calls: Sequence[ToolCall]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [c.to_openai() for c in calls]}


def _results(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    return [
        {"role": "tool", "tool_call_id": c.id, "name": c.name, "content": json.dumps({"ok": 1})}
        for c in calls
    ]


def _show(call: ToolCall | tuple[str, Mapping[str, Any]]) -> str:
    name, args = (call.name, call.arguments) if isinstance(call, ToolCall) else call
    return f"{name}({json.dumps(dict(args), ensure_ascii=False, sort_keys=True)})"


def _typed(call: ToolCall) -> tuple[dict[str, Any], list[str]] | str:
    """The call's arguments typed by its tool's schema and the repairs that took, or why not."""
    schema = _SCHEMAS.get(call.name)
    if schema is None:
        return f"{call.name} is not one of the tools offered"
    raw: str | dict[str, Any] = (
        call.arguments_text if call.arguments_text.strip() else call.arguments
    )
    try:
        done = prepare_arguments(raw, schema, name=call.name, text_values=call.text_values)
    except ArgumentsError as exc:
        return exc.explanation
    return done.arguments, list(done.repairs)


@dataclass
class _Rendering:
    """The calls asked for, the text the template wrote for them, and how it was read."""

    calls: tuple[ToolCall, ...]
    text: str
    result: ParseResult


def _render_calls(
    template: ChatTemplate, family: Family, calls: tuple[ToolCall, ...], none_content: bool
) -> tuple[_Rendering | None, str]:
    """The template's rendering of ``calls`` read by ``family``: the first that reads back as
    many calls as asked, else the first that rendered; or None and the template's error.

    Like detection, it tries with and without a system message and with and without the
    tools' results after the calls: some templates insist on either."""
    errors: list[str] = []
    first: _Rendering | None = None
    for head in ([_USER], [_SYSTEM, _USER]):
        for turn in ([_assistant(calls)], [_assistant(calls), *_results(calls)]):
            try:
                text, opened = assistant_text(
                    template,
                    head,
                    turn,
                    DOCTOR_TOOLS,
                    call_ids=family.call_ids,
                    keep_call_none=none_content,
                )
                result = family.parse(text, DOCTOR_TOOLS, reasoning_open=opened)
            except (TemplateError, LimitError) as exc:
                errors.append(str(exc))
                continue
            rendering = _Rendering(calls, text, result)
            if len(result.calls) == len(calls):
                return rendering, ""
            first = first or rendering
    return first, (errors[0] if errors else "")


def _parallel(
    template: ChatTemplate, family: Family, none_content: bool
) -> tuple[list[Check], _Rendering | None]:
    """Render both calls; a template that refuses two (or drops the second) gets one."""
    two, error = _render_calls(template, family, DOCTOR_CALLS, none_content)
    second = DOCTOR_CALLS[1].name
    if two is not None and (len(two.result.calls) == 2 or second in two.text):
        return [Check("parallel calls", True, "the template writes two calls in one turn")], two
    one, error_one = _render_calls(template, family, DOCTOR_CALLS[:1], none_content)
    if one is None:
        why = error_one or error or "it writes nothing for them"
        return [Check("parallel calls", False, f"the template cannot render a call: {why}")], None
    how = f" (it refuses two: {error})" if two is None and error else ""
    message = (
        f"the template renders only one call per turn: parallel calls are read one at a time{how}"
    )
    return [Check("parallel calls", True, message)], one


def _read_back(rendering: _Rendering) -> list[Check]:
    """Were the calls read back exactly, typed by the schemas, with nothing left over?"""
    result, calls = rendering.result, rendering.calls
    checks: list[Check] = []
    if len(result.calls) != len(calls):
        wrote = rendering.text.strip()
        notices = f"; {'; '.join(result.notices)}" if result.notices else ""
        checks.append(
            Check(
                "calls read",
                False,
                f"the family reads {len(result.calls)} of the {len(calls)} calls the template "
                f"writes{notices}; the template wrote: {wrote[:300]!r}",
            )
        )
    else:
        checks.append(Check("calls read", True, f"{len(calls)} of {len(calls)} calls read back"))
    got: list[str] = []
    repairs: list[str] = []
    wrong: list[str] = []
    for want, call in zip(calls, result.calls, strict=False):
        typed = _typed(call)
        if isinstance(typed, str):
            wrong.append(f"{call.name}: {typed}")
            continue
        arguments, fixed = typed
        got.append(_show((call.name, arguments)))
        repairs += [r for r in fixed if r not in repairs]
        if (call.name, arguments) != (want.name, want.arguments):
            wrong.append(f"expected {_show(want)} got {_show((call.name, arguments))}")
    if wrong:
        message = "calls read back with different arguments: " + "; ".join(wrong)
        checks.append(Check("arguments", False, message))
    elif got:
        how = f" (typed by the schemas: {', '.join(repairs)})" if repairs else ""
        checks.append(Check("arguments", True, f"read back exactly: {', '.join(got)}{how}"))
    left = result.content.strip()
    if left:
        message = f"markup is left in the reply text: {left[:200]!r}"
        checks.append(Check("no markup left", False, message))
    else:
        checks.append(Check("no markup left", True, "nothing of the calls is left as text"))
    return checks


def _conversation(template: ChatTemplate, family: Family | None) -> list[Check]:
    """A whole tool conversation, as toolwire would send it: do the tools and the tool's
    result reach the prompt? With no family the tools go in words (listed in the system
    prompt, results as user text), so that is the conversation rendered.

    Only the first tool is called, so the second one's name is in the prompt only when the
    template (or the words) describe the tools."""
    call = DOCTOR_CALLS[0]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are terse."},
        _USER,
        _assistant([call]),
        {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": _RESULT},
        {"role": "assistant", "content": _ANSWER},
        {"role": "user", "content": _FOLLOW_UP},
    ]
    tools: list[dict[str, Any]] | None = DOCTOR_TOOLS
    how = ""
    if family is None:
        listing, _ = tools_in_words(DOCTOR_TOOLS, _WORDS_CONTEXT)
        messages, tools, how = transcript_in_words(messages, listing), None, " (in words)"
    try:
        prompt = template.render(
            messages,
            tools,
            add_generation_prompt=True,
            call_ids=family.call_ids if family else "keep",
        )
    except (TemplateError, LimitError) as exc:
        message = f"the template refuses a tool conversation{how}: {exc}"
        return [Check("conversation", False, message, required=False)]
    checks = []
    if _RESULT in prompt:
        message = f"the tool's result reaches the prompt{how}"
        checks.append(Check("tool result", True, message, required=False))
    else:
        message = (
            f"the template drops the tool result{how}: the model never sees what a tool returned"
        )
        checks.append(Check("tool result", False, message, required=False))
    missing = [name for name in _SCHEMAS if name not in prompt]
    if missing:
        message = (
            f"the template does not describe the tools to the model{how}: "
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} nowhere in the prompt"
        )
        checks.append(Check("tools offered", False, message, required=False))
    else:
        message = f"the tools are named in the prompt{how}"
        checks.append(Check("tools offered", True, message, required=False))
    return checks


def diagnose(template: ChatTemplate) -> Report:
    """Check that tool calling works through ``template``, end to end, and say why not."""
    found = detect_format(template)
    family, format_ = found.family, found.format
    checks: list[Check] = []
    if family is None and found.unproven:  # a family read one call, not the template's two
        family, format_ = get_family(found.unproven[0]), found.unproven[0]
        why = f"{format_} reads one call of this template, not its two: detection names none"
        checks.append(Check("detected", False, why, required=False))
    if family is not None:
        checks.append(Check("family", True, f"{format_}: {family.label}"))
    elif found.errors:
        message = f"{_NO_FAMILY}; the template fails to render a tool call: {found.errors[0]}"
        checks.append(Check("family", False, message))
    else:
        written = found.call_text.strip()
        how = (
            f" (it writes a call as {written[:120]!r})"
            if DOCTOR_CALLS[0].name in written
            else " (it writes no call at all)"
        )
        checks.append(Check("family", False, _NO_FAMILY + how))
    if found.reasoning_open:
        message = (
            "the generation prompt opens a thinking block: "
            "the reply is read as thinking until it closes"
        )
        checks.append(Check("thinking", True, message))
    if family is not None and found.via == "prompt":
        message = (
            f"the template never shows a model's past calls: calls it writes are read as "
            f"{found.format} (its prompt names that format), but later turns lose them"
        )
        checks.append(Check("calls shown", False, message))
    elif family is not None:
        parallel, rendering = _parallel(template, family, found.none_content)
        checks += parallel
        if rendering is not None:
            checks += _read_back(rendering)
    checks += _conversation(template, family)
    return Report(template.name, format_, checks)
