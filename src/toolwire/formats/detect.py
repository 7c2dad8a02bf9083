"""Which grammar a chat template teaches its model, found by asking the template itself.

The probe renders one conversation twice: a user message with the generation prompt, and
the same followed by an assistant turn that calls a tool. What the second adds to the first,
cut at the end of the turn, is exactly the text the model was trained to write for that
call. The family whose parser reads that text back as the probe's call is the template's
format; ``none`` when no family does (a template that ignores tools, or a grammar toolwire
does not speak yet). No template source text is fingerprinted, so a renamed or lightly
edited template is still recognised, and a template that only looks like one is not.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..arguments import prepare_arguments
from ..errors import ArgumentsError, FormatError, LimitError, TemplateError
from ..messages import ToolCall
from ..templates import ChatTemplate
from ..templates.shaping import CallIds
from .base import Family
from .reasoning import CLOSERS, OPENERS, opens_reasoning
from .registry import _FAMILIES, get_family

__all__ = [
    "PROBE_CALL",
    "PROBE_TOOLS",
    "Detection",
    "assistant_text",
    "detect_format",
    "resolve_format",
]

PROBE_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city's name."},
                    "days": {"type": "integer", "description": "How many days ahead."},
                },
                "required": ["city"],
            },
        },
    }
]
PROBE_CALL = ToolCall("a1b2c3d4e", "get_weather", {"city": "Paris", "days": 3})
_PROBE_SCHEMA = PROBE_TOOLS[0]["function"]["parameters"]

_SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
_USER = {"role": "user", "content": "What will the weather be in Paris over the next 3 days?"}
_ASSISTANT = {"role": "assistant", "content": "", "tool_calls": [PROBE_CALL.to_openai()]}
_TOOL = {
    "role": "tool",
    "tool_call_id": PROBE_CALL.id,
    "name": PROBE_CALL.name,
    "content": '{"forecast": "sunny"}',
}

#: Where a turn ends, for templates whose end-of-turn token is not known from a GGUF file.
#: These are token texts, not template text: they say where a turn stops, never which
#: grammar was used inside it.
COMMON_END_TOKENS = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "</s>",
    "<｜end▁of▁sentence｜>",
    "<|return|>",
    "<|call|>",
    "<sep>",
    "</assistant>",  # poolside Laguna
    "[e~[",  # MiniMax M2
    "<|END_OF_TURN_TOKEN|>",
    "<|START_OF_TURN_TOKEN|>",  # Command R+: a call's turn is written without its end
    "<SPECIAL_12>",
    "<seed:eos>",  # ByteDance Seed-OSS
    "<|tool_response>",  # Gemma 4: a turn that calls tools stops here for the results
    "<turn|>",  # Gemma 4
    "<|eot|>",  # Muse Glimmer (not its <|eom|>: more messages of the same turn follow it)
    "<|end_of_msg|>",  # Kimi K3
)
_SENTINEL_EOS = "<|toolwire-eos|>"
_SENTINEL_BOS = "<|toolwire-bos|>"


@dataclass(frozen=True)
class Detection:
    """What the probe found: the format's name (``"none"`` if no family fits) and why."""

    format: str
    #: The text the template writes for the probe call, as the model would write it.
    call_text: str = ""
    #: True when the template's generation prompt opens a thinking block.
    reasoning_open: bool = False
    #: Families that read the probe call back (normally one).
    candidates: tuple[str, ...] = ()
    #: Why a probe rendering failed, when every attempt did.
    errors: tuple[str, ...] = field(default_factory=tuple)

    @property
    def family(self) -> Family | None:
        return None if self.format == "none" else get_family(self.format)


def _lcp(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on prefix equality: O(n log n) worst, fast in C
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _back_off(text: str, p: int) -> int:
    """Move a cut point back so it does not split a marker.

    A generation prompt ending ``<think>`` and a turn starting ``<tool_call>`` share
    ``<t``; the model's text starts at the marker, not inside it.
    """
    markers = [m for fam in _FAMILIES.values() for m in fam.markers if len(m) > 1]
    markers += [*OPENERS, *CLOSERS]
    moved = True
    while moved:
        moved = False
        for marker in markers:
            for k in range(len(marker) - 1, 0, -1):
                if k <= p and text.startswith(marker, p - k) and text.endswith(marker[:k], 0, p):
                    p -= k
                    moved = True
                    break
    return p


def _cut_turn(text: str, ends: Sequence[str]) -> str:
    cut = len(text)
    for token in ends:
        j = text.find(token)
        if 0 <= j < cut:
            cut = j
    return text[:cut]


def _attempts() -> Iterator[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """(conversation before the call, the call's turn): some templates insist on a system
    message, or on a tool result after a call."""
    for head in ([], [_SYSTEM]):
        base = [*head, _USER]
        yield base, [_ASSISTANT]
        yield base, [_ASSISTANT, _TOOL]


def _round_trips(family: Family, text: str, reasoning_open: bool) -> bool:
    generated = "\x00generated"
    result = family.parse(
        text, PROBE_TOOLS, reasoning_open=reasoning_open, make_id=lambda _i: generated
    )
    if len(result.calls) != 1 or result.content.strip():
        return False
    call = result.calls[0]
    # an id is generated, the probe's own, or one the model wrote (Kimi's functions.NAME:0)
    if call.id not in (generated, PROBE_CALL.id) and call.id not in text:
        return False
    if call.name != PROBE_CALL.name:
        return False
    # the parser gives the arguments as written (the XML families as text): compare them
    # typed by the probe tool's schema, the one way toolwire types arguments
    try:
        done = prepare_arguments(
            call.arguments_text if call.arguments_text.strip() else call.arguments,
            _PROBE_SCHEMA,
            text_values=call.text_values,
        )
    except ArgumentsError:
        return False
    return done.arguments == PROBE_CALL.arguments


def _with_sentinels(template: ChatTemplate) -> ChatTemplate:
    if template.eos_token and template.bos_token:
        return template
    return ChatTemplate(
        template.source,
        bos_token=template.bos_token or _SENTINEL_BOS,
        eos_token=template.eos_token or _SENTINEL_EOS,
        end_tokens=template.end_tokens,
        tool_source=template.tool_source,
        name=template.name,
    )


def assistant_text(
    template: ChatTemplate,
    before: Sequence[Mapping[str, Any]],
    turn: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    call_ids: CallIds = "keep",
) -> tuple[str, bool]:
    """The text a template puts in the model's mouth for ``turn``, and whether it starts
    inside a thinking block the generation prompt opened.

    ``before`` is rendered with the generation prompt, ``before + turn`` without; what the
    second adds, cut at the end of the turn, is what the model writes. Raises
    :class:`~toolwire.errors.TemplateError` or :class:`~toolwire.errors.LimitError` when the
    template refuses either conversation.
    """
    probe = _with_sentinels(template)
    a = probe.render(list(before), tools, add_generation_prompt=True, call_ids=call_ids)
    b = probe.render([*before, *turn], tools, add_generation_prompt=False, call_ids=call_ids)
    p = _back_off(b, _lcp(a, b))
    ends = [*probe.end_tokens, _SENTINEL_EOS, *COMMON_END_TOKENS]
    text = _cut_turn(b[p:], ends)
    # A generation prompt that closes an empty thinking block (``<think></think>``) where the
    # past turn writes only ``</think>``: the model writes what follows the prompt's closer.
    prompt_end = a.rstrip()
    for closer in CLOSERS:
        if prompt_end.endswith(closer) and text.startswith(closer):
            text = text[len(closer) :]
            break
    return text, opens_reasoning(b[:p])


def _probe(template: ChatTemplate) -> Detection:
    errors: list[str] = []
    first_text = ""
    first_open = False
    for before, after in _attempts():
        try:
            text, reasoning_open = assistant_text(template, before, after, PROBE_TOOLS)
            prompt_opens = opens_reasoning(
                _with_sentinels(template).render(before, PROBE_TOOLS, add_generation_prompt=True)
            )
        except (TemplateError, LimitError) as exc:
            errors.append(str(exc))
            continue
        found = tuple(
            name for name, fam in _FAMILIES.items() if _round_trips(fam, text, reasoning_open)
        )
        if found:
            return Detection(found[0], text, prompt_opens, found)
        if not first_text:
            first_text, first_open = text, prompt_opens
    if first_text or not errors:
        return Detection("none", first_text, first_open)
    return Detection("none", "", False, (), tuple(errors))


_CACHE: OrderedDict[tuple[str, str, str, tuple[str, ...]], Detection] = OrderedDict()
_CACHE_SIZE = 64
_LOCK = threading.Lock()


def detect_format(template: ChatTemplate) -> Detection:
    """Detect the template's tool-call family (cached by the template's hash and tokens)."""
    key = (template.sha256, template.bos_token, template.eos_token, tuple(template.end_tokens))
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    found = _probe(template)
    with _LOCK:
        _CACHE[key] = found
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return found


def resolve_format(setting: str, template: ChatTemplate | None = None) -> Family | None:
    """The family a ``tool_format`` setting means: ``auto`` detects, ``none`` is None.

    ``auto`` without a template is an error, as is an unknown name.
    """
    if setting == "none":
        return None
    if setting == "auto":
        if template is None:
            raise FormatError("tool_format 'auto' needs the model's chat template")
        return detect_format(template).family
    return get_family(setting)
