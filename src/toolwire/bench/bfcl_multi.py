"""BFCL's multi-turn categories through toolwire's tool loop, and through the engine alone.

A multi-turn case is a conversation: user turns, each answered by as many model replies as
the model wants, every call run on BFCL's simulated APIs (:class:`~.bfcl_state.World`) and its
result given back, until a reply makes no call. Through toolwire that is :func:`run_loop`
itself — the calls checked and typed by their schemas, a bad one answered with the error a
small model can act on — so the whole round trip is measured, not only the first reply. The
calls the loop ran, turn by turn and step by step, are then judged by BFCL's multi-turn
checker (:func:`~.bfcl_state.check_turns`).

The columns are conversations of their own, since a different reading of one reply leads to
a different next turn: **sent** (the loop strict: the engine's own calls only), **recovered**
(the loop as a caller runs it), **constrained** (in-process: calls finished under the tools'
grammar) and **alone** (the engine's Chat Completions with nothing in front, its
``tool_calls`` decoded as BFCL decodes them: arguments that are not JSON end the turn). Sent
and recovered share their generations while their conversations are the same: a reply asked
with the same prepared prompt is the recorded one (:class:`Recorded`), so they differ only
where toolwire's reading made the conversation differ (on a template that prints call ids,
which toolwire makes at random where the model writes none, they part at the first call).

A reply toolwire cannot read strictly (as sent) ends its turn, as BFCL ends a turn at a reply
it cannot decode; an engine that fails (an error, a timeout) fails the case, as BFCL fails a
case whose inference raised.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

from ..conversation import Conversation
from ..errors import BackendError, ToolwireError
from ..events import CallEnd, Done, Event, Notice, ToolRun
from ..loop import run_loop
from ..pipeline import Backend, Request
from ..pipeline.reply import reply
from ..pipeline.transport import Transport
from ..tools import Tool, Toolbox
from .bfcl_check import Verdict, openai_tools
from .bfcl_data import BfclCase
from .bfcl_state import MAX_STEPS, Call, World, check_turns

__all__ = ["ADDED_FUNCTIONS", "Conversed", "Recorded", "Timed", "converse"]

#: BFCL's DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC: the user turn that comes with
#: functions held out until then.
ADDED_FUNCTIONS = "I have updated some more functions you can choose from. What about now?"

#: A conversation's calls: ``turns[t][s]`` the calls run in step ``s`` of turn ``t``.
Turns = list[list[list[Call]]]


#: The kinds of :class:`BackendError` that are a reply toolwire would not read strictly (the
#: turn ends there), not an engine that failed.
_UNREAD = ("strict", "undeclared-tool")


class Conversed:
    """One column's conversation: its calls, what toolwire said, and why it stopped early:
    ``error``, a reply that ended its turn unread; ``failed``, an engine that failed, which
    fails the case."""

    def __init__(self) -> None:
        self.turns: Turns = []
        self.notices: list[str] = []
        self.error: str | None = None
        self.failed: str | None = None

    def verdict(self, case: BfclCase) -> Verdict:
        """BFCL's verdict (it runs the calls again: call it off the event loop)."""
        assert case.multi is not None
        if self.failed is not None:
            return Verdict(False, "multi_turn:inference_error", [self.failed])
        try:
            return check_turns(case.multi, self.turns)
        except (ToolwireError, RecursionError) as exc:  # a ground truth that cannot be read
            return Verdict(False, "checker_error", [str(exc)[:200]])

    def calls(self) -> list[list[list[list[Any]]]]:
        """The calls as JSON: each ``[name, arguments]``."""
        return [[[[n, k] for n, _, k in step] for step in steps] for steps in self.turns]


class Recorded:
    """A transport whose replies are kept by what was sent: a send of the same prepared
    turn (the same tokens or body, sampling and constraint) is given the kept events again,
    any other goes to the engine. Two readings of one conversation share its generations
    until they lead it apart."""

    def __init__(self, inner: Transport) -> None:
        self._inner = inner
        self._kept: dict[str, list[Event]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def stream(self, request: Request) -> AsyncGenerator[Event, None]:
        return reply(self, request)  # type: ignore[arg-type]

    async def send(self, prepared: Any) -> AsyncGenerator[Event, None]:
        r = prepared.request
        key = json.dumps(
            [prepared.payload, r.temperature, r.max_tokens, repr(r.sampling)],
            sort_keys=True,
            default=repr,
        ) + repr(prepared.constraint)
        if key in self._kept:
            for event in self._kept[key]:
                yield event
            return
        kept: list[Event] = []
        async with aclosing(self._inner.send(prepared)) as events:
            async for event in events:
                kept.append(event)
                if isinstance(event, Done):  # only a whole reply is kept (the reader stops)
                    self._kept[key] = kept
                yield event


class Timed:
    """A backend whose every reply must end within ``seconds``."""

    def __init__(self, inner: Backend, seconds: float) -> None:
        self._inner = inner
        self._seconds = seconds

    @property
    def name(self) -> str:
        return self._inner.name

    async def stream(self, request: Request) -> AsyncGenerator[Event, None]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._seconds
        async with aclosing(self._inner.stream(request)) as events:
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    raise asyncio.TimeoutError
                try:
                    event = await asyncio.wait_for(anext(events), left)
                except StopAsyncIteration:
                    return
                yield event


def _toolbox(functions: Sequence[Mapping[str, Any]], world: World) -> Toolbox:
    """The case's functions as BFCL offers them, each running on the world."""
    tools = []
    for spec in openai_tools(list(functions)):
        fn = spec["function"]
        name = fn["name"]

        def run(_name: str = name, **arguments: Any) -> str:
            return world.run_one(_name, (), arguments)

        tools.append(
            Tool.from_schema(
                name, fn.get("parameters") or {}, run, description=fn.get("description", "")
            )
        )
    return Toolbox(tools)


def _turn_messages(case: BfclCase, index: int) -> tuple[list[dict[str, Any]], bool]:
    """A turn's user messages, and whether functions held out until it join the tools."""
    assert case.multi is not None
    if index in case.multi.held_out:
        return [{"role": "user", "content": ADDED_FUNCTIONS}], True
    return list(case.question[index]), False


async def converse(
    backend: Backend,
    case: BfclCase,
    options: Mapping[str, Any],
    *,
    strict: bool,
    constrained: bool,
    timeout: float,
) -> Conversed:
    """The case through the tool loop: every turn's replies, its calls run on a world."""
    assert case.multi is not None
    out = Conversed()
    world = World(case.multi)
    functions = list(case.functions)
    conversation = Conversation()
    settings = {"strict": strict, "max_tool_iters": MAX_STEPS + 1, "tool_timeout": timeout}
    timed = Timed(backend, timeout)
    for index in range(len(case.question)):
        messages, added = _turn_messages(case, index)
        if added:
            functions += case.multi.held_out[index]
        conversation.messages.extend(messages)
        steps: list[list[Call]] = []
        step: list[Call] = []  # the calls run after the latest reply (they follow its Done)
        calling = 0  # the replies of this turn that made calls
        made_calls = False
        try:
            async for event in run_loop(
                timed,
                conversation,
                _toolbox(functions, world),
                settings=settings,
                request_options={**options, "constrained": constrained},
            ):
                if isinstance(event, ToolRun):
                    step.append((event.call.name, (), dict(event.call.arguments)))
                elif isinstance(event, CallEnd):
                    made_calls = True
                elif isinstance(event, Done):
                    if step:
                        steps.append(step)
                    step = []
                    calling += made_calls
                    made_calls = False
                elif isinstance(event, Notice):
                    out.notices.append(event.code)
        except BackendError as exc:
            if exc.kind not in _UNREAD:
                out.failed = str(exc)[:200]
                return out
            # as BFCL takes a reply it cannot decode: the turn ends there
            out.error = out.error or str(exc)[:200]
        except (ToolwireError, asyncio.TimeoutError) as exc:
            out.failed = str(exc)[:200] or "the engine did not answer in time"
            return out
        if step:
            steps.append(step)
        out.turns.append(steps)
        if calling > MAX_STEPS:  # BFCL forces the conversation to quit after this turn
            break
    return out
