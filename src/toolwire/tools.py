"""Tools: the function that runs plus the JSON schema a model sees, and a registry of them.

A tool is made from a plain Python function — its type hints and Google-style docstring
give the schema, through pydantic — or from an explicit schema. Flags say whether it only
reads and whether it has side effects; session-owned parameters (a workspace, a user id)
are filled by the session and never shown to the model, so a value the model sends for one
is dropped before the call.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import pydantic

from .errors import ToolwireError

__all__ = [
    "Tool",
    "ToolDefinitionError",
    "ToolDenied",
    "ToolOutcomeUnknown",
    "ToolUnavailable",
    "Toolbox",
]

F = TypeVar("F", bound=Callable[..., Any])

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")


class ToolDefinitionError(ToolwireError):
    """A tool cannot be made as asked (bad name, a parameter pydantic cannot describe…)."""


class ToolUnavailable(ToolwireError):
    """Raised by a tool that cannot serve now but may later (a rate limit, a service down).

    Nothing happened, so the call may be made again.
    """


class ToolOutcomeUnknown(ToolwireError):
    """Raised by a tool whose call was sent but whose answer never came (its connection
    dropped mid-call): it may or may not have taken effect, so it is never run again by
    itself; the model is told to check first.
    """


class ToolDenied(ToolwireError):
    """Raised by a tool that refuses the caller (permissions, a policy)."""


@dataclass(frozen=True)
class Tool:
    """One tool: what the model sees (name, description, parameters) and what runs."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    function: Callable[..., Any] | None = None
    read_only: bool = False
    side_effects: bool = False
    #: Parameters the session fills in; never in the schema, never taken from the model.
    session: frozenset[str] = field(default_factory=frozenset)
    #: Seconds a call may run before it counts as timed out (None: no limit).
    timeout: float | None = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ToolDefinitionError(
                f"tool name {self.name!r} must be 1-64 letters, digits, '_', '.' or '-'"
            )
        if self.parameters.get("type", "object") != "object":
            raise ToolDefinitionError(f"tool {self.name}: parameters must be an object schema")

    def schema(self) -> dict[str, Any]:
        """The tool in OpenAI's ``tools`` shape."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }

    @classmethod
    def from_schema(
        cls,
        name: str,
        parameters: Mapping[str, Any],
        function: Callable[..., Any] | None = None,
        *,
        description: str = "",
        read_only: bool = False,
        side_effects: bool = False,
        session: Iterable[str] = (),
        timeout: float | None = None,
    ) -> Tool:
        """A tool from an explicit JSON schema (``{"type": "object", ...}``); session
        parameters are taken out of it, as the model never sees them."""
        owned = frozenset(session)
        shown = dict(parameters)
        if owned and isinstance(shown.get("properties"), Mapping):
            shown["properties"] = {k: v for k, v in shown["properties"].items() if k not in owned}
            if isinstance(shown.get("required"), list):
                shown["required"] = [r for r in shown["required"] if r not in owned]
        return cls(
            name,
            description,
            shown,
            function,
            read_only,
            side_effects,
            owned,
            timeout,
        )

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        side_effects: bool = False,
        session: Iterable[str] = (),
        timeout: float | None = None,
    ) -> Tool:
        """A tool from a function: type hints and the docstring make its schema."""
        tool_name: str = name or str(getattr(function, "__name__", ""))
        owned = frozenset(session)
        summary, arg_docs = _parse_docstring(inspect.getdoc(function) or "")
        try:
            hints = typing.get_type_hints(function, include_extras=True)
        except Exception as exc:  # an unresolvable annotation
            raise ToolDefinitionError(
                f"tool {tool_name}: cannot read its type hints: {exc}"
            ) from exc
        fields: dict[str, Any] = {}
        signature = inspect.signature(function)
        for pname, param in signature.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ToolDefinitionError(
                    f"tool {tool_name}: *{pname} and **{pname} cannot be described to a model"
                )
            if pname in owned:
                continue
            annotation = hints.get(pname, Any)
            default = ... if param.default is param.empty else param.default
            fields[pname] = (annotation, pydantic.Field(default, description=arg_docs.get(pname)))
        missing = owned - set(signature.parameters)
        if missing:
            raise ToolDefinitionError(
                f"tool {tool_name}: session parameters {sorted(missing)} are not in its signature"
            )
        try:
            model = pydantic.create_model(f"{tool_name}_arguments", **fields)
            schema = model.model_json_schema()
        except Exception as exc:  # pydantic cannot describe a parameter's type
            raise ToolDefinitionError(f"tool {tool_name}: {exc}") from exc
        return cls(
            tool_name,
            summary if description is None else str(description),
            _tidy(schema),
            function,
            read_only,
            side_effects,
            owned,
            timeout,
        )


def _tidy(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated titles: they cost tokens and tell the model nothing."""

    def walk(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            return {
                k: walk(v, k == "properties")
                for k, v in node.items()
                if not (k == "title" and not in_properties and isinstance(v, str))
            }
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    tidy: dict[str, Any] = walk(schema)
    tidy.setdefault("properties", {})
    return tidy


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}[A-Za-z_][A-Za-z0-9_]*)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """A Google-style docstring: the text before the sections, and each argument's text."""
    lines = doc.splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section = ""
    current = ""
    indent = 0
    for line in lines:
        stripped = line.strip()
        heading = _SECTION.match(stripped)
        if heading and len(line) - len(line.lstrip()) == 0:
            section = heading.group(1)
            current = ""
            continue
        if not section:
            summary.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters") or not stripped:
            continue
        level = len(line) - len(line.lstrip())
        m = _ARG_LINE.match(stripped)
        if m and (not current or level <= indent):
            current = m.group(1).lstrip("*")
            indent = level
            args[current] = m.group(3).strip()
        elif current:
            args[current] = (args[current] + " " + stripped).strip()
    return "\n".join(summary).strip(), args


class Toolbox:
    """The tools a conversation may use, by name."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool | Callable[..., Any], **options: Any) -> Tool:
        """Add a :class:`Tool`, or make one from a function (``options`` as for
        :meth:`Tool.from_function`). A second tool of the same name is an error."""
        made = tool if isinstance(tool, Tool) else Tool.from_function(tool, **options)
        if made.name in self._tools:
            raise ToolDefinitionError(f"a tool named {made.name!r} is already registered")
        self._tools[made.name] = made
        return made

    @overload
    def tool(self, function: F, **options: Any) -> F: ...

    @overload
    def tool(self, function: None = None, **options: Any) -> Callable[[F], F]: ...

    def tool(self, function: F | None = None, **options: Any) -> F | Callable[[F], F]:
        """Decorator: ``@toolbox.tool`` or ``@toolbox.tool(read_only=True)``."""

        def register(fn: F) -> F:
            self.add(fn, **options)
            return fn

        return register(function) if function is not None else register

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def schemas(self, *, read_only: bool = False) -> list[dict[str, Any]]:
        """The tools in OpenAI's shape; with ``read_only``, only the tools that only read."""
        return [t.schema() for t in self._tools.values() if t.read_only or not read_only]
