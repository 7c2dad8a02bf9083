"""When a JSON object is a call: one rule, with each reader's shape given as data.

Hermes, Llama 3 and Mistral write a call as a JSON object, drift recovery reads one a model
wrote outside its grammar, and the reader for tools in words reads one leniently. They differ
only in the shape they accept (which key holds the arguments, which other keys may appear,
whether the name must be a declared tool), so the shape is data and the rule is written once.
The rule never types a value: the arguments are the object the model wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..arguments.read import ReadError, read_json
from .base import ToolIndex, loads_json

__all__ = ["NO_TOOL", "CallShape"]

#: Why a call naming one of a family's pseudo-tools (CallShape.no_tools) is none.
NO_TOOL = "the name is the template's pseudo-tool, not a call"

#: A call id the model wrote longer than this is not kept.
_MAX_ID = 256


@dataclass(frozen=True)
class CallShape:
    """The keys a call object may have, and what each must hold."""

    #: The keys that may hold the arguments, first found first; the arguments must be an object.
    args_keys: tuple[str, ...] = ("arguments",)
    #: Every key of ``args_keys`` is the family's own (InternLM2's ``parameters`` and
    #: ``arguments``): whichever the model writes streams. Else only the first streams, and
    #: the others are a reader's tolerance.
    args_alike: bool = False
    #: The key that holds the tool's name, a non-empty string.
    name_key: str = "name"
    #: Other keys allowed, each only with this value (``{"type": "function"}``).
    constants: Mapping[str, str] = field(default_factory=dict)
    #: Other keys allowed, each holding any string (Mistral's call ``id``).
    strings: frozenset[str] = frozenset()
    #: Any other key is ignored instead of ruling the object out.
    other_keys: bool = False
    #: An object without arguments is a call with none.
    args_optional: bool = False
    #: The arguments may be written as a string holding their JSON (read leniently).
    args_as_text: bool = False
    #: Unless strict, the arguments may be a string holding their JSON object, read strictly
    #: (Hermes models that encode them twice); the reader names that repair.
    args_in_string: bool = False
    #: The key of ``args_keys`` that is a reader's tolerance, not the family's (``parameters``
    #: where its template writes ``arguments``): a call that uses it is named.
    args_repair: str = ""
    #: The key holding the model's own call id (kept when it is a usable id); a string.
    id_key: str = ""
    #: The name must be one of the declared tools.
    declared_only: bool = False
    #: The call is ``{NAME: {arguments}}``: one key, the tool's name, holding the arguments
    #: (Apertus); the other fields do not apply.
    name_is_key: bool = False
    #: Names a family's template gives a pseudo-tool that is no call (Command R+'s
    #: ``directly-answer``: answer in text), unless the caller declared a tool so named.
    no_tools: frozenset[str] = frozenset()

    @property
    def args_key(self) -> str:
        """The key a streaming reader passes on as the call's argument text."""
        return self.args_keys[0]

    def name_problem(self, name: str, tools: ToolIndex) -> str:
        """Why a call with this name is not one, or ``""``."""
        if not name:
            return "the call has an empty name"
        if name in self.no_tools and not tools.has(name):
            return NO_TOOL
        if self.declared_only and not tools.has(name):
            return f"{name!r} is not a declared tool"
        return ""

    def call_id(self, obj: Any) -> str:
        """The model's own id for the call in ``obj``, when it wrote a usable one, else ``""``."""
        value = obj.get(self.id_key) if self.id_key and isinstance(obj, dict) else None
        if isinstance(value, str) and value.strip() and len(value) <= _MAX_ID:
            return value
        return ""

    def read(
        self, obj: Any, tools: ToolIndex, *, strict: bool = False
    ) -> tuple[str, dict[str, Any]] | str:
        """``(name, arguments)`` when ``obj`` is a call in this shape, else why it is not.

        ``strict`` refuses the tolerances this shape allows and a reader names when used."""
        if not isinstance(obj, dict):
            return "the call is not a JSON object"
        if self.name_is_key:
            return self._read_keyed(obj, tools)
        key = next((k for k in self.args_keys if k in obj), None)
        if not self.other_keys:
            known = {self.name_key, key, self.id_key, *self.constants, *self.strings} - {""}
            extra = set(obj) - known
            if extra:
                return f"unexpected keys {sorted(extra)}"
        name = obj.get(self.name_key)
        if not isinstance(name, str) or not name:
            return "the call has no name"
        args = obj[key] if key is not None else ({} if self.args_optional else None)
        if isinstance(args, str) and self.args_as_text:
            try:
                args = read_json(args).value
            except ReadError:
                args = None
        elif isinstance(args, str) and self.args_in_string and not strict:
            try:
                args = loads_json(args)
            except (ValueError, RecursionError):
                args = None
        if not isinstance(args, dict):
            return f'"{key or self.args_key}" must be an object'
        for k, value in self.constants.items():
            if k in obj and obj[k] != value:
                return f'"{k}" must be "{value}", not {obj[k]!r}'
        for k in {*self.strings, self.id_key} - {""}:
            if k in obj and not isinstance(obj[k], str):
                return f'"{k}" must be a string'
        problem = self.name_problem(name, tools)
        return problem or (name, args)

    def _read_keyed(
        self, obj: dict[Any, Any], tools: ToolIndex
    ) -> tuple[str, dict[str, Any]] | str:
        if len(obj) != 1:
            return "the call must be one tool's name holding its arguments"
        ((name, args),) = obj.items()
        if not isinstance(args, dict):
            return f'"{name}" must hold an object'
        problem = self.name_problem(name, tools)
        return problem or (name, args)
