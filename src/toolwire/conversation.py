"""A conversation: its messages, its own settings, the session's values; and pruning.

Settings survive with the conversation (a stored one keeps them in its store, see
:mod:`toolwire.store`). Precedence, highest first: an explicit argument or
command-line flag, the conversation's own stored setting, the environment
(``TOOLWIRE_TOOL_FORMAT``, validated: an invalid value warns and is ignored), the model's
default (its detected family), then ``auto``. A conversation's format, once set, is the one
its replies are parsed with, whatever the process default says.
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import UsageError
from .formats.registry import FORMAT_SETTINGS, family_names

__all__ = ["DEFAULTS", "Conversation", "prune", "resolve_settings"]

#: Every setting with its built-in default.
DEFAULTS: dict[str, Any] = {
    "tool_format": "auto",
    "strict": False,
    "constrained": True,
    "max_tool_iters": 8,
    "read_only": False,
    "tool_timeout": 60.0,
}
_ENV = {"tool_format": "TOOLWIRE_TOOL_FORMAT"}
_NONE_OK = {"tool_timeout"}


def _valid(name: str, value: Any) -> bool:
    if name == "tool_format":
        return isinstance(value, str) and value in (*FORMAT_SETTINGS, *family_names())
    if name in ("strict", "constrained", "read_only"):
        return isinstance(value, bool)
    if name == "max_tool_iters":
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 100
    if name == "tool_timeout":
        return value is None or (isinstance(value, (int, float)) and value > 0)
    return True


def resolve_settings(
    explicit: Mapping[str, Any] | None = None,
    stored: Mapping[str, Any] | None = None,
    *,
    model_default: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Each setting from the first place that gives a valid value (see the module).

    An invalid explicit or stored value raises :class:`~toolwire.errors.UsageError` (a
    ``ValueError``): the caller asked for it, so ignoring it would hide the mistake.
    """
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for name, default in DEFAULTS.items():
        chosen = default
        layers: list[tuple[str, Any]] = []
        # None means "not given", except where None is itself a value (no time limit)
        for where, given in (("explicit", explicit), ("stored", stored)):
            if given and (given.get(name) is not None or (name in given and name in _NONE_OK)):
                layers.append((where, given[name]))
        if name in _ENV and env.get(_ENV[name]):
            layers.append(("env", env[_ENV[name]]))
        if model_default and model_default.get(name) is not None:
            layers.append(("model", model_default[name]))
        for where, value in layers:
            if _valid(name, value):
                chosen = value
                break
            if where == "env":
                warnings.warn(
                    f"{_ENV[name]}={value!r} is not a valid {name}; ignored", stacklevel=2
                )
            else:
                raise UsageError(f"{value!r} is not a valid {name} ({where} setting)")
        out[name] = chosen
    return out


@dataclass
class Conversation:
    """Messages in OpenAI's wire shape, the conversation's settings, the session's values.

    ``session`` holds the values of session-owned tool parameters (a workspace, a user id):
    the loop fills them in, and a value the model sends for one is dropped.
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    session: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def add_user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def add_system(self, text: str) -> None:
        self.messages.insert(0, {"role": "system", "content": text})

    def commit(self) -> None:
        """The loop calls this whenever the conversation is whole — every call it holds has
        its result — before the next request and when a reply ends. A conversation kept in
        a store (:class:`toolwire.store.StoredConversation`) writes its new messages here; a
        plain one has nothing to keep."""


def _estimate(message: Mapping[str, Any]) -> int:
    """A rough token count (4 characters a token) for when no tokenizer is at hand."""
    size = len(str(message.get("content") or ""))
    for call in message.get("tool_calls") or ():
        size += len(str(call))
    return size // 4 + 4


def prune(
    messages: Sequence[Mapping[str, Any]],
    budget: int,
    count: Callable[[Mapping[str, Any]], int] = _estimate,
) -> list[dict[str, Any]]:
    """Fit the conversation in ``budget`` tokens by dropping whole turns, oldest first.

    A turn is a user message and everything after it up to the next one, so an assistant
    call never survives without its results, nor a result without its call. System
    messages and the latest turn are always kept.
    """
    head = [dict(m) for m in messages if m.get("role") == "system"]
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    turns: list[list[dict[str, Any]]] = []
    for message in rest:
        if message.get("role") == "user" or not turns:
            turns.append([])
        turns[-1].append(message)
    used = sum(count(m) for m in head) + sum(count(m) for t in turns for m in t)
    while len(turns) > 1 and used > budget:
        used -= sum(count(m) for m in turns.pop(0))
    return head + [m for t in turns for m in t]
