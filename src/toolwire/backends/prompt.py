"""The prompt a chat template makes of one planned turn: the one renderer of a local prompt.

The local engine (:class:`~toolwire.backends.llamacpp.LlamaCppBackend`) and ``toolwire
render`` both go through :class:`TemplateTransport`, so the command prints exactly what the
model reads: the same plan (tools in the template's own grammar, or in words when it has
none), the same call ids, one call per message where the family writes them so, a ``None``
content beside past calls where the template writes calls only then (DeepSeek R1's
distills), and the same thinking switch.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping

from ..errors import BackendError
from ..events import Event
from ..formats.base import Family
from ..formats.detect import detect_format, resolve_format
from ..pipeline import ModelMemory, Plan, Prepared, Request, Transport, planned
from ..templates import ChatTemplate, TemplateBudget
from ..templates.roles import system_in_place
from ..templates.shaping import CallIds

__all__ = ["TemplateTransport"]


class TemplateTransport(Transport):
    """A chat template with no engine behind it: it plans and renders a turn's prompt, and
    sends nothing. The local engine is one of these with a model to generate."""

    name = "template"
    native_tools = False

    def __init__(
        self,
        template: ChatTemplate,
        *,
        tool_format: str = "auto",
        context_tokens: int = 4096,
        memory: ModelMemory | None = None,
        model: str = "",
        budget: TemplateBudget | None = None,
    ) -> None:
        self.template = template
        self.model = model or template.name or "template"
        self.endpoint = "template:" + template.sha256
        self.context_tokens = context_tokens
        self.memory = memory if memory is not None else ModelMemory()
        self.family: Family | None = _resolve(tool_format, template, budget)

    def family_for(self, request: Request) -> Family | None:
        """The grammar this request's reply is read in: the conversation's own format when
        it has one, else the template's."""
        if request.tool_format is None:
            return self.family
        return resolve_format(request.tool_format, self.template)

    def system_in_place(self) -> bool:
        """What the template does with a system message inside the conversation."""
        return system_in_place(self.template)

    def prompt(
        self,
        request: Request,
        plan: Plan,
        *,
        add_generation_prompt: bool = True,
        call_ids: CallIds | None = None,
        budget: TemplateBudget | None = None,
    ) -> str:
        """The rendered prompt for a request as the pipeline planned it (the request as it
        will be sent and its plan: :func:`toolwire.pipeline.planned`), as the model reads it.
        A transport never plans a turn itself. ``call_ids`` overrides the family's."""
        family = plan.family if plan.mode == "grammar" else self.family_for(request)
        kwargs = request.extra.get("chat_template_kwargs")
        return self.template.render(
            request.messages,
            request.tools if plan.mode == "grammar" else None,
            add_generation_prompt=add_generation_prompt,
            enable_thinking=_thinks(request),
            template_kwargs=kwargs if isinstance(kwargs, Mapping) else None,
            call_ids=call_ids or (family.call_ids if family else "keep"),
            one_call_per_message=bool(family and family.one_call_per_message),
            # a template that writes past calls only beside None content (R1's distills)
            keep_call_none=detect_format(self.template, budget=budget).none_content,
            budget=budget,
        )

    def planned_prompt(
        self,
        request: Request,
        *,
        add_generation_prompt: bool = True,
        call_ids: CallIds | None = None,
        budget: TemplateBudget | None = None,
    ) -> str:
        """The prompt of ``request`` as the pipeline would plan and send it."""
        sent, plan = planned(self, request)
        return self.prompt(
            sent,
            plan,
            add_generation_prompt=add_generation_prompt,
            call_ids=call_ids,
            budget=budget,
        )

    def prepare(self, request: Request, plan: Plan) -> Prepared:
        """The prompt as text: a template alone has no tokenizer."""
        return Prepared(request, self.prompt(request, plan))

    async def send(self, prepared: Prepared) -> AsyncGenerator[Event, None]:
        """A template alone cannot generate."""
        raise BackendError("a chat template alone has no model to generate with")
        yield  # pragma: no cover - makes this an async generator


def _resolve(
    tool_format: str, template: ChatTemplate, budget: TemplateBudget | None
) -> Family | None:
    if tool_format == "auto":
        return detect_format(template, budget=budget).family
    return resolve_format(tool_format, template)


def _thinks(request: Request) -> bool:
    """Whether the template's thinking switch is on: the request's ``think`` (Messages'
    ``thinking``), else its ``reasoning_effort`` (``none`` is off, any effort on); off when
    neither is given."""
    if request.think is not None:
        return request.think
    effort = request.extra.get("reasoning_effort")
    return isinstance(effort, str) and effort != "none"
