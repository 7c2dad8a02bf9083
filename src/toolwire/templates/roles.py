"""Where a chat template takes a system message: anywhere in the conversation, or only first.

Clients send system messages inside a conversation (Claude Code after the first user turn,
Codex as several developer messages at its start). Chat Completions allows them, and many
templates render them in place (Qwen 2.5, Llama 3); others refuse them ("System message must
be at the beginning", Mistral's "roles must alternate") or drop them without a word (gpt-oss,
SmolLM3, MiniMax). :func:`system_in_place` renders one probe conversation to tell which, so
the reply pipeline (:mod:`toolwire.pipeline.content`) can move such a message where the
template reads it instead of failing or losing it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..errors import LimitError, TemplateError, UsageError
from .budget import TemplateBudget
from .chat import ChatTemplate

__all__ = ["system_in_place"]

_MARK = "probe-system-note-7f3a"
_PROBE = (
    {"role": "user", "content": "probe-user-first"},
    {"role": "system", "content": _MARK},
    {"role": "user", "content": "probe-user-second"},
)

_CACHE: OrderedDict[tuple[str, str, str, str], bool] = OrderedDict()
_CACHE_SIZE = 64
_LOCK = threading.Lock()


def system_in_place(template: ChatTemplate) -> bool:
    """Does ``template`` render a system message between two user turns, where it stands?

    False when the render fails or the message's text is not between the two user turns'
    texts. A fact of the template's source (cached by its hash, tokens and variables, as
    detection is), learned with one render under a budget of its own."""
    key = (
        template.sha256,
        template.bos_token,
        template.eos_token,
        repr(sorted(template.variables.items())),
    )
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    budget = TemplateBudget()
    try:
        text = template.render(list(_PROBE), None, budget=budget)
    except (TemplateError, LimitError, UsageError):
        found = False
    else:
        first, mark = text.find("probe-user-first"), text.find(_MARK)
        found = 0 <= first < mark < text.find("probe-user-second")
    if budget.exhausted:  # cut short: not a fact of the template
        return found
    with _LOCK:
        _CACHE[key] = found
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return found
