"""The tool loop: ask the model, run its calls, give it the results, until it answers.

A turn may make several calls; each is checked by the argument pipeline, run, and answered
with its own tool message, in the order the model made them. Every failure — unreadable or
missing arguments, an unknown tool, a write in read-only mode, an exception, a timeout —
becomes the result the model reads. ``max_tool_iters`` bounds the model turns that may call
tools; after it the model gets one last turn without tools, and its answer ends the reply.
Independent read-only calls of one turn run concurrently. Closing the event stream early
closes the provider's stream before any pending tool runs. Whenever the conversation is
whole again — an answer, or a turn's calls all answered — its ``commit`` runs, before the
next request: a stored conversation is written there, a step at a time. A ``confirm``
callback, when given, is asked before each call runs (after its checks): a refusal is a
``denied`` result the model reads, and nothing runs. A tool that raises
:class:`ToolOutcomeUnknown` (its connection dropped mid-call) gets an ``unknown-outcome``
result, never a retry.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import Any

from .conversation import Conversation, resolve_settings
from .events import CallEnd, Event, Notice, TextDelta, ToolResult, ToolRun
from .formats.words import HOW_TO_CALL, UNREADABLE
from .messages import ToolCall, assistant_message, tool_message
from .pipeline import Backend, Request, stream_sync
from .pipeline.end import prepare_call
from .tools import Tool, Toolbox, ToolDenied, ToolOutcomeUnknown, ToolUnavailable

__all__ = ["RETRY_DELAYS", "Confirm", "run_loop", "run_loop_sync"]

_MAX_RESULT_CHARS = 64 * 1024

#: Waits before running a call again after the tool said it is unavailable (nothing was done,
#: so running it again is safe, with the same arguments and operation id).
RETRY_DELAYS = (0.2, 1.0)

#: Asked before a checked call runs; False refuses it. A plain function runs in a thread (it
#: may wait for a person); it is never timed, as the tool's own time starts after it.
Confirm = Callable[[ToolCall], "bool | Awaitable[bool]"]


async def run_loop(
    backend: Backend,
    conversation: Conversation,
    toolbox: Toolbox,
    *,
    settings: Mapping[str, Any] | None = None,
    model_default: Mapping[str, Any] | None = None,
    request_options: Mapping[str, Any] | None = None,
    retry_delays: Sequence[float] = RETRY_DELAYS,
    confirm: Confirm | None = None,
) -> AsyncIterator[Event]:
    """Run the conversation's next reply; yields every event, including tool runs and
    results. The conversation gains the assistant turns and tool messages as they happen.

    ``retry_delays`` are the waits, in seconds, before each new try of a call whose tool said
    it is unavailable: one try more than there are delays. ``confirm`` is asked before each
    checked call runs; a refusal is the ``denied`` result the model reads."""
    s = resolve_settings(settings, conversation.settings, model_default=model_default)
    options = dict(request_options or {})
    constrained = options.pop("constrained", s["constrained"])
    for turn in range(s["max_tool_iters"] + 1):
        last = turn == s["max_tool_iters"]
        offered = [] if last else toolbox.schemas(read_only=s["read_only"])
        request = Request(
            list(conversation.messages),
            offered or None,
            tool_choice="auto" if offered else None,
            tool_format=s["tool_format"] if s["tool_format"] != "auto" else None,
            strict=s["strict"],
            constrained=constrained,
            **options,
        )
        text: list[str] = []
        ends: list[CallEnd] = []
        async with aclosing(backend.stream(request)) as events:
            async for event in events:
                yield event
                if isinstance(event, TextDelta):
                    text.append(event.text)
                elif isinstance(event, CallEnd):
                    ends.append(event)
        if last and ends:  # a backend that gave calls anyway: none is run
            yield Notice(
                "calls-after-bound", "the last turn offered no tools; its calls were not run"
            )
            ends = []
        calls = [end.call for end in ends]
        # an answer written as a call is the pipeline's ``call-without-tools`` notice
        conversation.messages.append(assistant_message("".join(text), calls))
        if not calls:
            conversation.commit()
            return
        prepared = [_prepare(end, toolbox, conversation, s) for end in ends]
        if confirm is not None:
            prepared = [await _confirmed(p, confirm) for p in prepared]
        for typed, _, failure in prepared:
            if failure is None:
                yield ToolRun(typed)
        results = await _run_all(prepared, s, tuple(retry_delays))
        for call, result in zip(calls, results, strict=True):
            yield result
            conversation.messages.append(tool_message(call.id, call.name, result.content))
        conversation.commit()  # every call answered: kept before the next request


def run_loop_sync(
    backend: Backend,
    conversation: Conversation,
    toolbox: Toolbox,
    **options: Any,
) -> Iterator[Event]:
    """The same, for sync code."""
    return stream_sync(run_loop(backend, conversation, toolbox, **options))


def _prepare(
    end: CallEnd, toolbox: Toolbox, conversation: Conversation, s: Mapping[str, Any]
) -> tuple[ToolCall, Tool | None, ToolResult | None]:
    """Check a call before anything runs: the tool, the permission, the arguments (typed
    once, at the reply pipeline's end: :mod:`toolwire.pipeline.end`)."""
    call = end.call
    if call.name == UNREADABLE:
        return call, None, ToolResult(call.id, call.name, HOW_TO_CALL, "invalid")
    tool = toolbox.get(call.name)
    if tool is None:
        names = ", ".join(t.name for t in toolbox if t.read_only or not s["read_only"])
        return (
            call,
            None,
            ToolResult(
                call.id,
                call.name,
                f"There is no tool named {call.name}. The tools are: {names}.",
                "unknown-tool",
            ),
        )
    if s["read_only"] and not tool.read_only:
        return (
            call,
            tool,
            ToolResult(
                call.id,
                call.name,
                f"{call.name} changes things, and this conversation is read-only: it was not run.",
                "denied",
            ),
        )
    if end.arguments is None or _sets_session(end, tool):
        # a backend whose events did not come through the pipeline, or a call that set the
        # session's own fields (strict would refuse them as fields the tool does not take):
        # typed here by the same policy, the session's fields never the model's
        end, _ = prepare_call(_without_session(end, tool), tool.parameters, strict=s["strict"])
    if end.invalid is not None:
        return call, tool, ToolResult(call.id, call.name, end.invalid, "invalid")
    # the session's own fields are the session's: never the model's
    arguments = {k: v for k, v in end.call.arguments.items() if k not in tool.session}
    for name in tool.session:
        if name == "operation_id":
            key = f"{conversation.id}:{call.id}:{call.name}".encode()
            arguments[name] = "op-" + hashlib.sha256(key).hexdigest()[:24]
        elif name in conversation.session:
            arguments[name] = conversation.session[name]
    typed = ToolCall(call.id, call.name, arguments, call.arguments_text)
    return typed, tool, None


def _raw(call: ToolCall) -> Any:
    """The call's arguments as the model wrote them, decoded when they are JSON."""
    if not call.arguments_text.strip():
        return call.arguments
    try:
        return json.loads(call.arguments_text)
    except (ValueError, RecursionError):
        return None


def _sets_session(end: CallEnd, tool: Tool) -> bool:
    raw = _raw(end.call) if tool.session else None
    return isinstance(raw, dict) and bool(tool.session & set(raw))


def _without_session(end: CallEnd, tool: Tool) -> CallEnd:
    """The call as if the model had not sent the session's own fields (untyped again)."""
    raw = _raw(end.call)
    if not tool.session or not isinstance(raw, dict) or not tool.session & set(raw):
        return replace(end, arguments=None, invalid=None)
    kept = {k: v for k, v in raw.items() if k not in tool.session}
    call = replace(end.call, arguments=kept, arguments_text=json.dumps(kept, ensure_ascii=False))
    return replace(end, call=call, arguments=None, invalid=None)


async def _confirmed(
    prepared: tuple[ToolCall, Tool | None, ToolResult | None], confirm: Confirm
) -> tuple[ToolCall, Tool | None, ToolResult | None]:
    """A checked call as it is once asked about: unchanged, or refused before it runs."""
    call, tool, failure = prepared
    if failure is not None:
        return prepared
    if inspect.iscoroutinefunction(confirm):
        answer = await confirm(call)
    else:
        answer = await asyncio.to_thread(confirm, call)
        if inspect.isawaitable(answer):
            answer = await answer
    if answer is True:
        return prepared
    return call, tool, _denied(call, "it was not confirmed")


def _denied(call: ToolCall, reason: object) -> ToolResult:
    return ToolResult(call.id, call.name, f"{call.name} was refused: {reason}", "denied")


async def _run_all(
    prepared: list[tuple[ToolCall, Tool | None, ToolResult | None]],
    s: Mapping[str, Any],
    retry_delays: tuple[float, ...],
) -> list[ToolResult]:
    """Run the calls in order; consecutive read-only calls run together."""
    results: list[ToolResult | None] = [None] * len(prepared)
    i = 0
    while i < len(prepared):
        _, tool, failure = prepared[i]
        if failure is not None or tool is None:
            results[i] = failure
            i += 1
            continue
        group = [i]
        if tool.read_only:
            j = i + 1
            while (
                j < len(prepared) and prepared[j][2] is None and (prepared[j][1] or tool).read_only
            ):
                group.append(j)
                j += 1
        outcomes = await asyncio.gather(
            *(_run_one(prepared[k][0], prepared[k][1], s, retry_delays) for k in group)  # type: ignore[arg-type]
        )
        for k, outcome in zip(group, outcomes, strict=True):
            results[k] = outcome
        i = group[-1] + 1
    return [r for r in results if r is not None]


async def _run_one(
    call: ToolCall, tool: Tool, s: Mapping[str, Any], retry_delays: tuple[float, ...]
) -> ToolResult:
    for delay in retry_delays:
        result = await _run_once(call, tool, s)
        if result.status != "unavailable":
            return result
        await asyncio.sleep(delay)
    return await _run_once(call, tool, s)


async def _run_once(call: ToolCall, tool: Tool, s: Mapping[str, Any]) -> ToolResult:
    timeout = tool.timeout if tool.timeout is not None else s["tool_timeout"]
    fn = tool.function
    if fn is None:
        return ToolResult(call.id, call.name, f"{call.name} has no function to run.", "error")
    try:
        call_method = type(fn).__call__ if not inspect.isfunction(fn) else None
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call_method):
            value = await asyncio.wait_for(fn(**call.arguments), timeout)
        else:
            value = await asyncio.wait_for(asyncio.to_thread(fn, **call.arguments), timeout)
            if inspect.isawaitable(value):  # a callable that hands back a coroutine
                value = await asyncio.wait_for(value, timeout)
    except asyncio.TimeoutError:
        if tool.side_effects:
            return ToolResult(
                call.id,
                call.name,
                f"{call.name} did not finish within {timeout:g} s. It may or may not have "
                "taken effect: check before calling it again.",
                "unknown-outcome",
            )
        return ToolResult(
            call.id, call.name, f"{call.name} did not finish within {timeout:g} s.", "timeout"
        )
    except ToolUnavailable as exc:
        return ToolResult(
            call.id,
            call.name,
            f"{call.name} is unavailable for now ({exc}). Nothing was done; it may be tried again.",
            "unavailable",
        )
    except ToolDenied as exc:
        return _denied(call, exc)
    except ToolOutcomeUnknown as exc:
        return ToolResult(
            call.id,
            call.name,
            f"{call.name} did not finish ({exc}). It may or may not have taken effect: "
            "check before calling it again.",
            "unknown-outcome",
        )
    except Exception as exc:  # the tool's failure is data for the model, never swallowed
        return ToolResult(
            call.id, call.name, f"{call.name} failed: {type(exc).__name__}: {exc}", "error"
        )
    return ToolResult(call.id, call.name, _as_text(value))


def _as_text(value: Any) -> str:
    try:
        return _text_of(value)
    except Exception:  # a value that will not become text is still a result
        return f"(a {type(value).__name__} that could not be shown as text)"


def _text_of(value: Any) -> str:
    if value is None:
        text = "done"
    elif isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = str(value)
    if len(text) > _MAX_RESULT_CHARS:
        text = text[:_MAX_RESULT_CHARS] + f"\n… ({len(text) - _MAX_RESULT_CHARS} more characters)"
    return text
