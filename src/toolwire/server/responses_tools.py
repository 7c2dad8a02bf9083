"""The tools of a Responses request: as the engine is offered them, and as the client knows
them.

* A ``function`` tool is offered as it is.
* A ``custom`` tool (free-form input, as Codex sends ``apply_patch``) is offered as a
  function taking one string, ``input``. Its ``format``: ``text`` says the input is free text;
  a ``grammar`` in ``regex`` syntax becomes a ``pattern`` on that string, when it is one the
  checkers can take safely (:func:`safe_pattern`: no nested or alternating repetition, no
  back-references or look-arounds; a local engine's schema grammar then constrains the
  string); a ``lark`` grammar is shown in the description (up to :data:`GRAMMAR_SHOWN`
  characters). A Lark grammar could constrain the string too — llguidance reads Lark — but
  only inside a JSON string, escaped: not done here.
* A ``namespace`` tool's functions and custom tools (Codex's MCP tools: ``mcp__calc`` >
  ``calculator``) are offered under flat names a model can write — ``mcp__calc__calculator``:
  letters, digits, ``_`` and ``-``, at most 64 characters (a longer one cut and ended by a
  hash of the whole), a name another tool has taken given ``_2``, ``_3``… in the order
  declared — and their calls are named back (:mod:`toolwire.server.responses_items`).
* A client-run ``tool_search`` (Codex finds its MCP tools so: deferred, until the model
  searches) is offered as a function of its ``parameters``; its call goes back as a
  ``tool_search_call`` with those arguments, and the tools its ``tool_search_output`` gives
  in the history are offered from then on, the output read to the model as their names.
* Beside a client-run ``tool_search``, a tool of the request (or of a namespace) marked
  ``defer_loading`` is not offered until a ``tool_search_output`` of the history gives it:
  the model knows it by the search alone.
* Other kinds (web search, a hosted shell, a hosted tool search…) are left out with a
  ``tool-not-served`` notice.

:class:`Offered` holds both sides: the engine's tools, each engine name's
:class:`~toolwire.server.responses_items.ClientTool`, and the engine name of each tool as the
client names it, for the calls in the history and for ``tool_choice``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..budget import paid
from .core import Told
from .fields import check
from .refusal import RequestError
from .responses_items import ClientTool

__all__ = ["GRAMMAR_SHOWN", "Offered", "found", "listed", "offered", "safe_pattern", "tool_choice"]

#: The longest grammar shown in a custom tool's description.
GRAMMAR_SHOWN = 4000
#: The longest regular expression taken as a ``pattern``.
_PATTERN_LONGEST = 1000
_MAX_NAME = 64

Kind = Literal["function", "custom", "tool_search"]


class _Function(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    type: Literal["function"]
    name: str = Field(min_length=1, max_length=256)
    description: str | None = None
    parameters: dict[str, Any] | None = None


class _Format(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    type: Literal["text", "grammar"]
    syntax: Literal["lark", "regex"] | None = None
    definition: str | None = Field(default=None, max_length=100_000)


class _Custom(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    type: Literal["custom"]
    name: str = Field(min_length=1, max_length=256)
    description: str | None = None
    format: _Format | None = None


class _Search(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    type: Literal["tool_search"]
    execution: Literal["client", "server"] | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


#: A tool search's parameters when the client gives none.
_SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "What the tools do."}},
    "required": ["query"],
}


class _Namespace(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    type: Literal["namespace"]
    name: str = Field(min_length=1, max_length=256)
    description: str | None = None
    tools: list[Any]


@dataclass
class Offered:
    """A request's tools on both sides (see the module)."""

    #: The engine's function tools.
    tools: list[dict[str, Any]] = field(default_factory=list)
    #: The tools the client knows under another name or kind, by engine name.
    client: dict[str, ClientTool] = field(default_factory=dict)
    #: The engine name of each tool as the client names it: (kind, namespace, name).
    names: dict[tuple[Kind, str | None, str], str] = field(default_factory=dict)
    #: What was left out.
    skipped: list[Told] = field(default_factory=list)

    def engine_name(self, kind: Kind, namespace: str | None, name: str) -> str:
        """The engine's name of a tool the client names so (in its history, its choice):
        the one offered, else the flat name it would have had."""
        found = self.names.get((kind, namespace, name))
        return found if found is not None else _flat(namespace, name)

    def chosen(self, kind: Kind, name: str, namespace: str | None) -> str | None:
        """The engine name ``tool_choice`` picks: the tool of that kind, name and namespace;
        without a namespace, a flat name offered or the one namespaced tool of that name."""
        if (kind, namespace, name) in self.names:
            return self.names[(kind, namespace, name)]
        if namespace is None:
            if any(t["function"]["name"] == name for t in self.tools):
                return name
            bare = [e for (k, _, n), e in self.names.items() if k == kind and n == name]
            if len(bare) == 1:
                return bare[0]
        return None


def _flat(namespace: str | None, name: str) -> str:
    """A name a model can write for ``name`` in ``namespace`` (see the module)."""
    raw = f"{namespace}__{name}" if namespace else name
    clean = re.sub(r"[^A-Za-z0-9_-]", "_", raw)
    if not re.match(r"[A-Za-z_]", clean):
        clean = "_" + clean
    if len(clean) > _MAX_NAME:
        digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        clean = clean[: _MAX_NAME - 9] + "_" + digest
    return clean


class _Names:
    """The engine names given so far, and for each flat name the next number to try after
    it: a name that collides with many (16,000 namespaces that flatten alike) is made
    unique in time linear in them all, never by counting up from 2 for each."""

    def __init__(self) -> None:
        self.taken: set[str] = set()
        self._next: dict[str, int] = {}

    def add(self, name: str) -> None:
        self.taken.add(name)

    def unique(self, name: str) -> str:
        """``name``, or ``name_2``, ``name_3``… (a long name cut to a stem first, which
        names of that stem share with their count), the first not taken."""
        if name not in self.taken:
            return name
        stem = name[: _MAX_NAME - 8]  # room for a suffix of up to seven digits
        k = self._next.get(stem, 2)
        while True:
            suffix = f"_{k}"
            candidate = (stem if len(name) > _MAX_NAME - len(suffix) else name) + suffix
            k += 1
            if candidate not in self.taken:
                self._next[stem] = k
                return candidate


def safe_pattern(definition: str) -> str | None:
    """``definition`` as a ``pattern`` that must match the whole string, when checking it
    cannot take long: short, compiles, and no repetition of a group that itself repeats or
    alternates (the shapes whose matching can take exponential time), no back-references
    or look-arounds (which the engines' grammar converters do not read). Else None."""
    if len(definition) > _PATTERN_LONGEST:
        return None
    try:
        re.compile(definition)
    except re.error:
        return None
    if re.search(r"\\[1-9]|\\k<|\(\?[=!<]", definition):
        return None
    groups: list[bool] = [False]  # per open group: does it repeat or alternate inside?
    closed = False  # the last item was a group that repeats or alternates inside
    i = 0
    while i < len(definition):
        ch = definition[i]
        if ch == "\\":
            i += 2
            closed = False
            continue
        if ch == "[":  # a class: skip to its end
            j = i + 1
            if j < len(definition) and definition[j] == "^":
                j += 1
            if j < len(definition) and definition[j] == "]":
                j += 1
            while j < len(definition) and definition[j] != "]":
                j += 2 if definition[j] == "\\" else 1
            i = j + 1
            closed = False
            continue
        if ch == "(":
            groups.append(False)
            if definition.startswith("(?:", i):
                i += 2
        elif ch == ")":
            inner = groups.pop() if len(groups) > 1 else False
            closed = inner
            i += 1
            if inner:
                groups[-1] = True
            continue
        elif ch in "*+?{":
            if closed:
                return None
            groups[-1] = True
        elif ch == "|":
            groups[-1] = True
        closed = False
        i += 1
    return f"^({definition})$"


def _custom_function(tool: _Custom, name: str) -> dict[str, Any]:
    """A custom tool as a function of one string."""
    value: dict[str, Any] = {
        "type": "string",
        "description": "The tool's whole input, as free text (not JSON).",
    }
    said = tool.description or ""
    fmt = tool.format
    if fmt is not None and fmt.type == "grammar" and fmt.definition:
        grammar = fmt.definition
        kind = "Lark grammar" if fmt.syntax == "lark" else "regular expression"
        if len(grammar) <= GRAMMAR_SHOWN:
            note = f"The input is free text (not JSON) in this {kind}:\n{grammar}"
        else:
            note = f"The input is free text (not JSON) in a {kind} ({len(grammar)} characters)."
        said = f"{said}\n\n{note}" if said else note
        pattern = safe_pattern(grammar) if fmt.syntax == "regex" else None
        if pattern is not None:
            value["pattern"] = pattern
    else:
        note = "The input is free text (not JSON)."
        said = f"{said}\n\n{note}" if said else note
    parameters = {
        "type": "object",
        "properties": {"input": value},
        "required": ["input"],
        "additionalProperties": False,
    }
    return {
        "type": "function",
        "function": {"name": name, "description": said, "parameters": parameters},
    }


def _function(tool: _Function, name: str) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": name, "parameters": tool.parameters or {"type": "object"}}
    if tool.description is not None:
        fn["description"] = tool.description
    return {"type": "function", "function": fn}


def _not_served(where: str, kind: str, name: Any) -> Told:
    named = f" {name[:80]!r}" if isinstance(name, str) else ""
    return Told(
        "tool-not-served",
        f"{where} (a {kind[:40]!r} tool{named}) was left out: function, custom, namespace "
        "and client-run tool_search tools are served",
    )


def offered(given: list[Any] | None, searched: list[tuple[str, Any]] | None = None) -> Offered:
    """The request's ``tools`` on both sides, and the ``searched`` ones a tool search of
    the history found (each with where it stands); a malformed one is a 400 naming it."""
    out = Offered()
    tools = [(f"tools[{i}]", tool) for i, tool in enumerate(given or ())] + (searched or [])
    if not tools:
        return out
    given_ = tools
    # deferral needs a search to load the tool: with no client-run search, nothing could
    searches = any(
        isinstance(t, dict) and t.get("type") == "tool_search" and t.get("execution") == "client"
        for _, t in tools
    )
    taken = _Names()
    members: list[tuple[str, str | None, _Function | _Custom | _Search]] = []
    for where, tool in given_:
        paid(1)  # a worker thread reading many tools gives the event loop its turn
        kind = tool.get("type") if isinstance(tool, dict) else None
        # a deferred tool of the request's own waits for a search to find it (the search's
        # output offers it, from ``searched``)
        own_list = searches and where.startswith("tools[")
        if own_list and _deferred(tool):
            continue
        if kind == "namespace":
            space = check(_Namespace, tool, where)
            for j, inner in enumerate(space.tools):
                paid(1)
                at = f"{where}.tools[{j}]"
                if not isinstance(inner, dict):
                    raise RequestError(f"'{at}' must be a tool object", at)
                if own_list and _deferred(inner):
                    continue
                inner_kind = inner.get("type")
                if inner_kind == "function":
                    members.append((at, space.name, check(_Function, inner, at)))
                elif inner_kind == "custom":
                    members.append((at, space.name, check(_Custom, inner, at)))
                else:
                    out.skipped.append(_not_served(at, str(inner_kind), inner.get("name")))
        elif kind == "custom":
            members.append((where, None, check(_Custom, tool, where)))
        elif kind == "tool_search" and tool.get("execution") == "client":
            members.append((where, None, check(_Search, tool, where)))
        elif isinstance(kind, str) and kind != "function":
            out.skipped.append(_not_served(where, kind, tool.get("name")))
        else:
            members.append((where, None, check(_Function, tool, where)))
    # plain functions keep their names; the others get theirs after, around them
    for _, namespace, tool in members:
        if namespace is None and isinstance(tool, _Function):
            taken.add(tool.name)
    for _, namespace, tool in members:
        plain = namespace is None and isinstance(tool, _Function)
        own = tool.name if not isinstance(tool, _Search) else "tool_search"
        kind_: Kind = (
            "function"
            if isinstance(tool, _Function)
            else "custom"
            if isinstance(tool, _Custom)
            else "tool_search"
        )
        if (kind_, namespace, own) in out.names:
            continue  # offered already (a tool found again by a search)
        name = own if plain else taken.unique(_flat(namespace, own))
        taken.add(name)
        out.names[(kind_, namespace, own)] = name
        if isinstance(tool, _Custom):
            out.tools.append(_custom_function(tool, name))
        elif isinstance(tool, _Search):
            out.tools.append(_search_function(tool, name))
        else:
            out.tools.append(_function(tool, name))
        if not plain:
            out.client[name] = ClientTool(kind_, own, namespace)
    return out


def _deferred(tool: Any) -> bool:
    """Is ``tool`` marked ``defer_loading`` (offered only once a tool search found it)?"""
    return isinstance(tool, dict) and tool.get("defer_loading") is True


def _search_function(tool: _Search, name: str) -> dict[str, Any]:
    """A client-run tool search as a function: its call asks the client for more tools."""
    said = tool.description or "Searches for more tools; those found can be called next."
    parameters = tool.parameters or _SEARCH_PARAMETERS
    return {
        "type": "function",
        "function": {"name": name, "description": said, "parameters": parameters},
    }


def found(tools: Any, where: str) -> list[tuple[str, Any]]:
    """The tools a ``tool_search_output`` item gives, each with where it stands."""
    if not isinstance(tools, list):
        raise RequestError(f"'{where}' must be a list of tools", where)
    return [(f"{where}[{j}]", tool) for j, tool in enumerate(tools)]


def listed(offer: Offered, tools: Any) -> str:
    """What a tool search found, for the model: the names it can call them by now."""
    names = []
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        if tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
            names += [
                offer.engine_name(inner.get("type", "function"), tool["name"], inner["name"])
                for inner in tool["tools"]
                if isinstance(inner, dict) and isinstance(inner.get("name"), str)
            ]
        else:
            names.append(offer.engine_name(tool.get("type", "function"), None, tool["name"]))
    if not names:
        return "No tools were found."
    return "Found, and can be called now: " + ", ".join(names[:100])


def tool_choice(offer: Offered, choice: Any) -> Any:
    """The request's ``tool_choice`` in the engine's names (``auto``, ``none``,
    ``required`` as they are)."""
    if not isinstance(choice, dict):
        return choice
    kind, name, namespace = choice.get("type"), choice.get("name"), choice.get("namespace")
    if kind not in ("function", "custom") or not isinstance(name, str):
        raise RequestError(
            "'tool_choice' must be auto, none, required, "
            '{"type": "function", "name": "..."} or {"type": "custom", "name": "..."}',
            "tool_choice",
        )
    if namespace is not None and not isinstance(namespace, str):
        raise RequestError("'tool_choice.namespace' must be a string", "tool_choice.namespace")
    picked = offer.chosen(kind, name, namespace)
    if picked is None:
        raise RequestError(
            f"tool_choice names {name[:80]!r}, which is not in 'tools'", "tool_choice"
        )
    return {"type": "function", "function": {"name": picked}}
