"""Structured outputs: a reply whose text must be JSON of a given shape, whichever API asked
it (Chat Completions ``response_format``, Responses ``text.format``, Messages
``output_config.format``, all settled into one :class:`~toolwire.pipeline.OutputFormat`).

Three things follow from one :class:`OutputFormat`, each here, once:

* **On an engine that samples under a grammar** (a local model in-process),
  :func:`output_constraint` is the turn's constraint: required (from the first token) and
  its grammar the schema's own, so the reply is the JSON the schema describes, exactly. The
  schema becomes GBNF through llama-cpp-python's converter (the port of llama.cpp's), as
  tool schemas do in :mod:`toolwire.formats.gbnf`; two things are changed in what it
  writes: a string character is never a raw control character (JSON has none), and white
  space between tokens is bounded but may be a line break and its indent, as models write
  JSON. A length or count bound too large to spell out in a grammar (above
  :data:`MAX_GRAMMAR_BOUND`) is left out of the grammar only (the check below still holds it),
  and a schema the converter cannot take leaves the grammar any JSON of the schema's type.
* **To an upstream**, the format in its dialect: :func:`response_format` (OpenAI's
  ``response_format``) and :func:`ollama_format` (Ollama's ``format``).
* **Either way, the reply is checked** (:class:`OutputCheck`, the last step of the reply
  pipeline): a turn that ends with text, not calls, must read as JSON that fits the schema;
  when it does not, an ``output-not-schema`` notice says why — and with ``strict`` (the
  client's, or toolwire's own) it is an error, :class:`~toolwire.errors.BackendError` of
  kind ``output-schema`` (an upstream's reply: the gateway answers 502) or
  ``output-schema-local`` (the gateway's own engine: 500). A reply cut by ``max_tokens``
  gets the notice only: its finish reason already says it is incomplete, and the official
  clients raise their own error for it.

With tools offered and a call not required, the model may call a tool or answer, and on an
engine that can it does one of the two from the first token (:class:`CallOrOutput`: the
tools' grammar in its required form, or the output's; prose is neither). With a call
required the turn's grammar is the call's; the format applies to the answer of a later turn.
Where no grammar is had (tools in words, an engine that cannot), the answer is checked only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import events as ev
from ..budget import CALL_STEPS, INLINE_STEPS, WorkBudget, WorkExceeded, charging
from ..errors import ArgumentsError, BackendError
from ..events import Event
from .request import OutputFormat, Request

__all__ = [
    "CallOrOutput",
    "OutputCheck",
    "OutputConstraint",
    "call_or_output",
    "misfit",
    "ollama_format",
    "output_constraint",
    "output_grammar",
    "response_format",
]

#: Length and count bounds above this are left out of a grammar: the converter spells a
#: bound out as nested repetitions, and engines compile nesting recursively (llguidance
#: refuses an array bound of 32 so spelt; 100,000 is a grammar no engine should be given).
#: The reply's check still holds the bound.
MAX_GRAMMAR_BOUND = 24
_BOUNDS = frozenset(
    {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
)
#: Keywords whose value is JSON data, not a schema: never loosened.
_VALUES = frozenset({"const", "enum", "default", "examples"})
#: White space between JSON tokens: none, a space, or a line break and its indent; bounded.
_SPACE = '| " " | "\\n"{1,2} [ \\t]{0,20}'
#: A character of a JSON string: no raw control character, escapes as JSON has them.
_CHAR = '[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})'


@dataclass(frozen=True)
class OutputConstraint:
    """The constraint of a turn whose answer is a structured output (the duck type the
    engine takes: ``required``, ``trigger``, ``grammar``): the grammar holds from the first
    token, so there is nothing to trigger on."""

    output: OutputFormat
    required: bool = True
    _grammar: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_grammar", output_grammar(self.output))

    def trigger(self, text: str, *, searched: int = 0, thinking: bool = False) -> None:
        """Never: the reply is under the grammar from its start."""
        del text, searched, thinking
        return None

    def grammar(self, form: str, lead: str = "") -> str:
        """The schema's GBNF (``root``), whatever the form; ``lead`` written before it."""
        del form
        if not lead:
            return self._grammar
        return self._grammar.replace("root ::= ", f"root ::= {json.dumps(lead)} ", 1)


def output_constraint(output: OutputFormat) -> OutputConstraint:
    """The constraint that makes an engine write ``output``'s JSON (see the module's doc)."""
    return OutputConstraint(output)


@dataclass(frozen=True)
class CallOrOutput:
    """A turn with tools and a structured output, a call not required: from the first token
    the reply is either the calls (the tools' own grammar, in their ``required`` form) or the
    output's JSON — as the APIs define it, the model calls a tool or answers in the schema.
    Each grammar's rules are kept apart by a prefix on the output's."""

    calls: Any  # the tools' constraint (the duck type: its ``grammar("required")``)
    output: OutputFormat
    required: bool = True

    def trigger(self, text: str, *, searched: int = 0, thinking: bool = False) -> None:
        """Never: the reply is under the grammar from its start."""
        del text, searched, thinking
        return None

    def grammar(self, form: str, lead: str = "") -> str:
        """Either grammar, from the first token (``form`` and ``lead`` are the calls')."""
        del form
        calls = _renamed(str(self.calls.grammar("required", lead)), "calls-")
        answer = _renamed(output_grammar(self.output), "output-")
        return f"root ::= calls-root | output-root\n{calls}\n{answer}"


#: A GBNF token: a string literal, a character class, a name, or anything else.
_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|[A-Za-z0-9_-]+|\s+|.')


def _renamed(grammar: str, prefix: str) -> str:
    """``grammar`` with each rule's name (and every reference to it) given ``prefix``;
    literals and character classes untouched."""
    names = {line.split("::=", 1)[0].strip() for line in grammar.splitlines() if "::=" in line}
    out = []
    for line in grammar.splitlines():
        if "::=" not in line:
            continue
        out.append(
            "".join(prefix + token if token in names else token for token in _TOKEN.findall(line))
        )
    return "\n".join(out)


def call_or_output(calls: Any, output: OutputFormat) -> CallOrOutput | None:
    """:class:`CallOrOutput` when the tools' constraint can be had in its required form;
    None otherwise (the answer is then only checked)."""
    try:
        combined = CallOrOutput(calls, output)
        combined.grammar("required")
    except Exception:  # a tools' grammar that cannot be built so: unconstrained answer
        return None
    return combined


def _schema(output: OutputFormat) -> Mapping[str, Any]:
    if output.kind == "json_object":
        return {"type": "object"}
    return output.schema if output.schema is not None else {}


def _loosened(schema: Any) -> Any:
    """``schema`` without the bounds too large for a grammar (see :data:`MAX_GRAMMAR_BOUND`)."""
    if isinstance(schema, list):
        return [_loosened(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    return {
        key: value if key in _VALUES else _loosened(value)
        for key, value in schema.items()
        if not (
            key in _BOUNDS
            and isinstance(value, int)
            and not isinstance(value, bool)
            and value > MAX_GRAMMAR_BOUND
        )
    }


def output_grammar(output: OutputFormat) -> str:
    """The GBNF of exactly the JSON ``output`` asks for, its rule ``root``."""
    from llama_cpp.llama_grammar import SchemaConverter

    schema = _loosened(_schema(output))
    attempts: list[Any] = [schema, _fallback(schema)]
    for attempt in attempts:
        converter: Any = SchemaConverter(  # type: ignore[no-untyped-call]
            prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False
        )
        try:
            converter.visit(converter.resolve_refs(attempt, ""), "")
        except Exception:  # the converter's own refusal: a looser grammar, checked after
            continue
        rules: dict[str, str] = dict(converter._rules)
        rules["space"] = _SPACE
        if "char" in rules:
            rules["char"] = _CHAR
        return "\n".join(f"{name} ::= {rule}" for name, rule in sorted(rules.items()))
    raise ValueError("no grammar for this output format")  # pragma: no cover - {} converts


def _fallback(schema: Any) -> dict[str, Any]:
    """Any JSON of the schema's own type (an object when it says so), else any JSON."""
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    return {"type": kind} if isinstance(kind, str) else {}


def response_format(output: OutputFormat) -> dict[str, Any]:
    """``output`` as OpenAI's Chat Completions ``response_format``."""
    if output.kind == "json_object":
        return {"type": "json_object"}
    inner: dict[str, Any] = {"name": output.name, "strict": output.strict}
    if output.schema is not None:
        inner["schema"] = dict(output.schema)
    return {"type": "json_schema", "json_schema": inner}


def ollama_format(output: OutputFormat) -> str | dict[str, Any]:
    """``output`` as Ollama's ``format``: the schema itself, or ``"json"``."""
    if output.kind == "json_schema" and output.schema is not None:
        return dict(output.schema)
    return "json"


def misfit(output: OutputFormat, text: str, budget: WorkBudget | None = None) -> str | None:
    """Why ``text`` is not the JSON ``output`` asks for; None when it is. The check is
    charged to ``budget`` (with the text's share), :class:`WorkExceeded` past it."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return f"the reply is not JSON ({str(exc)[:120]})"
    if output.kind == "json_object" or output.schema is None:
        return (
            None
            if output.kind != "json_object" or isinstance(value, dict)
            else ("the reply is JSON but not an object")
        )
    from jsonschema.exceptions import best_match

    from ..arguments.schema import validator_for

    if budget is not None:
        budget.grant(text)
    try:
        with charging(budget):
            error = best_match(validator_for(output.schema).iter_errors(value))
    except ArgumentsError as exc:  # refused at the request's check; kept safe here
        return f"the schema cannot be checked: {str(exc)[:200]}"
    if error is None:
        return None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    at = f"'{where.lstrip('.')}'" if where else "its root"
    return f"the reply does not fit the schema at {at}: {error.message[:200]}"


def _from_the_start(notice: ev.Notice) -> bool:
    """An engine's notice that the reply was under a grammar from its first token (the one
    a call's grammar found begun in the reply says so otherwise)."""
    return notice.code == "constrained-call" and "required" in notice.message


class OutputCheck:
    """The reply checked against its structured output, at its end (see the module's doc):
    push each event as it comes; what to give on comes back.

    ``upstream``: the reply came from another server (its misfit is that server's fault),
    else from the gateway's own engine. On a turn with no tools, a grammar that held from
    the first token was the output's, and its notice says so (``constrained-output``).
    """

    def __init__(self, request: Request, *, upstream: bool) -> None:
        output = request.output
        self._output = output
        self._strict = request.strict or bool(output and output.strict)
        self._upstream = upstream
        # the engine's notice of a grammar from the first token, on a turn that required no
        # call, is of the output's grammar (alone, or a call's or the output's)
        self._ours = not request.required
        self._tools = bool(request.tools)
        self._text: list[str] = []
        self._budget = request.budget

    def offloaded(self, event: Event) -> bool:
        """Whether pushing ``event`` checks the output with more work than the event loop
        should spend (see :meth:`toolwire.pipeline.end.End.offloaded`)."""
        if self._output is None or not isinstance(event, ev.Done):
            return False
        size = sum(len(piece) for piece in self._text)
        return self._budget.left + CALL_STEPS + size > INLINE_STEPS

    def push(self, event: Event) -> list[Event]:
        output = self._output
        if output is None:
            return [event]
        if isinstance(event, ev.TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ev.Notice) and self._ours and _from_the_start(event):
            either = "a call's or " if self._tools else ""
            return [
                ev.Notice(
                    "constrained-output",
                    f"the reply was written under the grammar of {either}the {output.name!r} "
                    "output format's schema",
                )
            ]
        elif isinstance(event, ev.Done) and event.finish_reason != "tool_calls":
            text = "".join(self._text)
            try:
                why = misfit(output, text, self._budget)
            except WorkExceeded as exc:
                skipped = f"{output.name!r}: the reply was not checked against its schema: {exc}"
                if self._strict:
                    kind = "output-schema" if self._upstream else "output-schema-local"
                    raise BackendError(skipped, kind=kind) from None
                return [ev.Notice("check-skipped", skipped), event]
            if why is None:
                return [event]
            if self._strict and event.finish_reason != "length":
                kind = "output-schema" if self._upstream else "output-schema-local"
                raise BackendError(
                    f"the model's reply is not the {output.name!r} output format: {why}",
                    kind=kind,
                )
            return [ev.Notice("output-not-schema", f"{output.name!r}: {why}"), event]
        return [event]
