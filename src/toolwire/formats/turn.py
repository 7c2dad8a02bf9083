"""Where a template's rendering of one assistant turn starts and ends, found from the template.

Detection needs the exact text a model was trained to write for a turn. Two renderings of
the same conversation say it: one ending with a plain assistant reply whose text is known
(:data:`PLAIN_REPLY`), and one where that reply is followed by another user message. What
the template writes after the reply, the same in both, is the end of a turn (MiniMax M1's
``<end_of_sentence>``, ChatML's ``<|im_end|>``): no list of known tokens is needed for it
(:func:`learned_end`). The same plain rendering says where the assistant's own text starts:
its longest common prefix with a rendering whose turn makes calls stops where the reply and
the calls begin (``start="turn"`` in :func:`turn_texts`), whatever the template writes before
the turn. That
matters for templates that render the conversation before a call differently from the
generation prompt (vLLM's Mistral-parallel example moves its system prompt into the last user
message only when no assistant turn follows; other templates write the assistant's header
with other whitespace or an empty thinking block in a past turn).

:func:`turn_texts` renders inside the caller's :class:`~toolwire.templates.TemplateBudget`
(the plain renderings once per conversation and tool list, kept in the caller's ``memo``);
the rest is text work, linear in the rendering's length (``back_off`` in the markers').
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..errors import LimitError, TemplateError
from ..templates import ChatTemplate, TemplateBudget
from ..templates.shaping import CallIds
from .reasoning import known_tags, opens_reasoning
from .registry import families

__all__ = [
    "PROBE_DATETIME",
    "Plain",
    "Start",
    "back_off",
    "cut_turn",
    "lcp",
    "learned_end",
    "turn_texts",
    "with_sentinels",
]

#: The content of the plain assistant turn: a text no markup starts with, so a common prefix
#: with a call's rendering stops exactly where the assistant's own text starts.
PLAIN_REPLY = "\u00a7 plain reply \u00a7"
#: The message after the plain turn, so the template has to end that turn.
NEXT_USER: dict[str, Any] = {"role": "user", "content": "And tomorrow?"}
#: Templates reading ``datetime`` get this one while probing: both renderings must agree.
PROBE_DATETIME = "Jan 01 2026 00:00:00 GMT"
_SENTINEL_EOS = "<|toolwire-eos|>"
_SENTINEL_BOS = "<|toolwire-bos|>"
#: The longest end of a turn learned (longer is a template's prose, not a token).
_MAX_END = 40
#: Two tags written one after the other: the end is the first.
_TAG_JOIN = re.compile(r"(?<=[>\]])(?=[<\[])")


def lcp(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on prefix equality: O(n log n) worst, fast in C
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def plain_turns(before: Sequence[Mapping[str, Any]]) -> tuple[list[Any], list[Any]]:
    """The two conversations :func:`learned_end` compares: ``before`` then the plain reply,
    and the same followed by another user message."""
    reply = {"role": "assistant", "content": PLAIN_REPLY}
    last = [*before, reply]
    return last, [*last, NEXT_USER]


def learned_end(last: str, followed: str) -> str:
    """The end of an assistant turn, learned from the renderings of :func:`plain_turns` (the
    plain reply last, without a generation prompt; and followed by a user message).

    What both write after the reply, up to its first whitespace, and of two adjacent tags the
    first; ``""`` when they share nothing there (a template that ends a turn only by starting
    the next one), or the reply is not written exactly once in each.
    """
    if last.count(PLAIN_REPLY) != 1 or followed.count(PLAIN_REPLY) != 1:
        return ""
    a = last[last.index(PLAIN_REPLY) + len(PLAIN_REPLY) :]
    b = followed[followed.index(PLAIN_REPLY) + len(PLAIN_REPLY) :]
    common = a[: lcp(a[: _MAX_END * 4], b[: _MAX_END * 4])].lstrip()
    words = common.split()
    if not words:
        return ""
    end = _TAG_JOIN.split(words[0])[0]
    # a token, not a word: two characters at least, and markup in it
    if len(end) < 2 or len(end) > _MAX_END or end.isalnum():
        return ""
    # the common text must stop at the end's boundary in both: "<|" shared by two headers is
    # the start of the next message, not an end
    at = common.index(end) + len(end)
    if at == len(common) and not _ends_here(a, b, len(a) - len(a.lstrip()) + at):
        return ""
    return end


def _ends_here(a: str, b: str, at: int) -> bool:
    """Whether a learned end that runs to the last shared character at ``at`` is whole: each
    rendering has nothing more there, or whitespace, or the next tag."""
    for text in (a, b):
        if at < len(text) and not (text[at].isspace() or text[at] in "<["):
            return False
    return True


def inside_before(rendered: str, before: Sequence[Mapping[str, Any]], at: int) -> bool:
    """Whether ``at`` falls before the end of the last message of ``before`` in ``rendered``:
    a cut there would put the user's words in the model's mouth."""
    if not before:
        return False
    content = before[-1].get("content")
    if not isinstance(content, str) or not content.strip():
        return False
    found = rendered.rfind(content.strip())
    return found >= 0 and at < found + len(content.strip())


def with_sentinels(template: ChatTemplate) -> ChatTemplate:
    """``template`` with sentinel BOS/EOS tokens where it has none, so a turn's end shows."""
    if template.eos_token and template.bos_token:
        return template
    return ChatTemplate(
        template.source,
        bos_token=template.bos_token or _SENTINEL_BOS,
        eos_token=template.eos_token or _SENTINEL_EOS,
        end_tokens=template.end_tokens,
        tool_source=template.tool_source,
        name=template.name,
        variables=template.variables,
    )


def back_off(text: str, p: int) -> int:
    """Move a cut point back so it does not split a marker.

    A generation prompt ending ``<think>`` and a turn starting ``<tool_call>`` share
    ``<t``; the model's text starts at the marker, not inside it.
    """
    tags = known_tags()
    markers = [m for fam in families() for m in fam.markers if len(m) > 1]
    markers += [*tags.blocks, *tags.closers]
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


def cut_turn(text: str, ends: Sequence[str], learned: str = "", names: Sequence[str] = ()) -> str:
    """``text`` up to the first of ``ends``, or of the ``learned`` end of a plain turn after
    the turn's last call (``names``): a turn ends after its calls. What a template writes
    after a plain turn's text may also close a channel the calls follow (Kimi K3's response)
    or an empty content the calls follow as a message of their own (GigaChat's
    ``<|message_sep|>`` before ``function call``)."""
    cut = len(text)
    for token in ends:
        j = text.find(token)
        if 0 <= j < cut:
            cut = j
    if learned:
        last = max((text.rfind(name) for name in names), default=-1)
        j = text.find(learned, max(last, 0))
        if last >= 0 and 0 <= j < cut:
            cut = j
    return text[:cut]


#: Where the model's text for a turn starts: after what the generation prompt and the turn's
#: rendering share (``"prompt"``), or after what a plain assistant turn and it share
#: (``"turn"``; :mod:`toolwire.formats.turn`).
Start = Literal["auto", "prompt", "turn"]
#: The renderings of the plain turn for one conversation and tool list, kept for one
#: detection: (the plain turn last, the end of a turn learned from it).
Plain = dict[str, tuple[str, str]]


def _plain(
    probe: ChatTemplate,
    before: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    budget: TemplateBudget,
    memo: Plain,
) -> tuple[str, str]:
    """The rendering of ``before`` with the plain reply last, and the end of a turn learned
    from it (:func:`~toolwire.formats.turn.learned_end`); ``("", "")`` when refused."""
    key = json.dumps(
        [list(before), [t.get("function", t).get("name") for t in tools or ()]], default=str
    )
    hit = memo.get(key)
    if hit is not None:
        return hit
    last, followed = plain_turns(before)
    try:
        a = probe.render(
            last, tools, add_generation_prompt=False, datetime=PROBE_DATETIME, budget=budget
        )
        b = probe.render(
            followed, tools, add_generation_prompt=False, datetime=PROBE_DATETIME, budget=budget
        )
        found = (a, learned_end(a, b))
    except (TemplateError, LimitError):
        found = ("", "")
    memo[key] = found
    return found


def _opens_for_closer(prompt: str, text: str) -> bool:
    """The generation prompt opens a thinking block and the turn starts with its closer: the
    past turn's thinking was dropped (GLM 4.7's ``</think><tool_call>…``), so the model's
    reply starts inside the block the prompt opened and closes it before the call."""
    tail, head = prompt.rstrip(), text.lstrip()
    tags = known_tags()
    return any(
        tail.endswith(opener) and head.startswith(closer)
        for opener, closer in (*tags.blocks.items(), *tags.prompt_blocks.items())
    )


def turn_texts(
    template: ChatTemplate,
    before: Sequence[Mapping[str, Any]],
    turn: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    call_ids: CallIds,
    keep_call_none: bool,
    budget: TemplateBudget,
    memo: Plain,
    known_ends: Sequence[str] = (),
) -> list[tuple[str, bool, str]]:
    """Each reading of the model's text for ``turn``: ``(text, opened, start)``, the most
    likely first, one per distinct text (``toolwire.formats.detect.assistant_text`` says
    how). ``known_ends`` are token texts that end a turn besides the template's own tokens
    and the end learned from it."""
    probe = with_sentinels(template)
    a = probe.render(
        list(before),
        tools,
        add_generation_prompt=True,
        call_ids=call_ids,
        datetime=PROBE_DATETIME,
        budget=budget,
    )
    b = probe.render(
        [*before, *turn],
        tools,
        add_generation_prompt=False,
        call_ids=call_ids,
        keep_call_none=keep_call_none,
        datetime=PROBE_DATETIME,
        budget=budget,
    )
    plain, end = _plain(probe, before, tools, budget, memo)
    names = [
        str(call.get("function", {}).get("name", ""))
        for message in turn
        for call in message.get("tool_calls") or ()
        if isinstance(call, Mapping) and call.get("function", {}).get("name")
    ]
    # the end the template writes after a plain turn first; the known token texts stay for
    # a call's turn that ends otherwise (<|call|>, <|tool_response>) and for templates whose
    # turns end only where the next begins
    ends = [*probe.end_tokens, _SENTINEL_EOS, *known_ends]
    starts = {"prompt": back_off(b, lcp(a, b))}
    if plain:
        starts["turn"] = back_off(b, lcp(plain, b))
    order = ["prompt", "turn"]
    if "turn" in starts and inside_before(b, before, starts["prompt"]):
        order.reverse()  # the prompt's diff reaches into the user's message: not the model's
    out: list[tuple[str, bool, str]] = []
    prompt_end = a.rstrip()
    for kind in order:
        if kind not in starts:
            continue
        at = starts[kind]
        text = cut_turn(b[at:], ends, end, names)
        # A generation prompt that closes an empty thinking block (``<think></think>``) where
        # the past turn writes only ``</think>``: the model writes what follows the closer.
        for closer in known_tags().closers:
            if prompt_end.endswith(closer) and text.startswith(closer):
                text = text[len(closer) :]
                break
        opened = opens_reasoning(b[:at]) or _opens_for_closer(a, text)
        if all(text != seen for seen, _, _ in out):
            out.append((text, opened, kind))
    return out
