"""How many tokens a request's prompt takes, as the engine will count them: for Messages'
``count_tokens`` and Responses' ``input_tokens``, one way for both.

Exact where the engine can say: a local model renders the prompt with its template and counts
it with its own tokenizer; an upstream that serves a tokenizer (llama-server, vLLM:
:meth:`~toolwire.backends.openai.OpenAIBackend.count_prompt`) is asked over the very body the
pipeline would send it. Elsewhere, or when the engine does not answer, the count is an
estimate (4 characters a token) named in a ``tokens-estimated`` notice: an agent that
compacts its context by the count then knows it may be off.
"""

from __future__ import annotations

import json
from functools import partial

from ..budget import WorkBudget
from ..conversation import _estimate
from ..pipeline import Backend, Request, Transport, planned
from .core import Told
from .work import Work

__all__ = ["count_input"]


async def count_input(
    backend: Backend, request: Request, budget: WorkBudget, work: Work
) -> tuple[int, list[Told]]:
    """The request's input tokens, and a notice when they are estimated."""
    if getattr(backend, "counts", False) and isinstance(backend, Transport):
        # planned here, as the pipeline plans a turn (off the event loop when large)
        if budget.inline:
            sent, plan = planned(backend, request)
        else:
            sent, plan = await work.apart(budget, partial(planned, backend, request))
        counted = await backend.count_prompt(sent, plan)  # type: ignore[attr-defined]
        if isinstance(counted, int):
            return counted, []
    prompt = getattr(backend, "prompt", None)
    if isinstance(backend, Transport) and callable(prompt):
        # the prompt as the pipeline plans it (tools in the template, in words, or none),
        # rendered off the event loop when the request is large
        if budget.inline:
            return _rendered(backend, request), []
        return await work.apart(budget, partial(_rendered, backend, request)), []
    tools = sum(len(json.dumps(t)) for t in request.tools or ()) // 4
    estimate = sum(_estimate(m) for m in request.messages) + tools
    told = Told(
        "tokens-estimated",
        "the engine does not count tokens for the gateway: this is an estimate, "
        "4 characters a token",
    )
    return estimate, [told]


def _rendered(backend: Transport, request: Request) -> int:
    prompt = backend.prompt(*planned(backend, request))  # type: ignore[attr-defined]
    return int(backend.count_tokens(prompt))
