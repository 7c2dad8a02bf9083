"""A call whose name was left out, named by its arguments: the one declared tool they fit.

Kimi K2 writes a call's id in place of its name, ``functions.NAME:N``; a model sometimes
writes only the counter, ``0``, and its arguments (vLLM and SGLang read it). Such a call
names no tool; it is read as a call to the one declared tool its arguments can be for, and
only then (a call must never be guessed between two tools): the only tool declared, or the
only one whose schema lists every field given (or takes any) and finds every field it
requires.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..events import NoticeCode
from .base import ToolIndex
from .formsteps import NAMED
from .jsonscan import ObjectScanner
from .markerstream import FAILED, Body, MarkerStream, expect_literal
from .tagsteps import _ARGS, NUMBER

if TYPE_CHECKING:
    from .derived import DerivedShape

__all__ = ["NameSteps", "fitting_tool"]


def fitting_tool(tools: ToolIndex, args: Mapping[str, object]) -> str | None:
    """The one declared tool a call of ``args`` can be to, or None (no tool, or several)."""
    if not tools.known or not len(tools):
        return None
    if len(tools) == 1:
        return tools.names[0]
    fits = [name for name in tools.names if _takes(tools.schema(name) or {}, args)]
    return fits[0] if len(fits) == 1 else None


def _takes(schema: Mapping[str, object], args: Mapping[str, object]) -> bool:
    # (the schema walkers, loaded by the first call that needs naming: most replies never do)
    from ..arguments.schema import declared, matching_pattern, resolve

    props, patterns, is_open = declared(schema, schema)
    if not is_open and any(k not in props and not matching_pattern(patterns, k) for k in args):
        return False
    root = resolve(schema, schema)
    required = root.get("required") if isinstance(root, Mapping) else None
    return all(k in args for k in required) if isinstance(required, list) else True


class NameSteps(Body):
    """The steps of the engine's body (a mixin of :class:`~.shapereader.DerivedBody`) for a
    call's name where it is no plain name: its namespace left out, or only its number
    written (named by its arguments), or announced later than read (``deferred``)."""

    shape: DerivedShape
    stream: MarkerStream
    todo: list[str]
    told: list[tuple[NoticeCode, str]]
    opened_by: str
    call_name: str
    counter: bool
    index: int
    id: str
    model_id: str
    scanner: ObjectScanner | None
    bare: bool
    primed: bool
    headed: bool

    if TYPE_CHECKING:  # the body's own, which these steps call

        def words(self, words: tuple[str, ...], then: int) -> None: ...

        def _then(self, i: int) -> tuple[int, bool]: ...

        def _announce(self) -> None: ...

    def _no_namespace(self, s: str, i: int, word: str) -> bool | None:
        """Unless strict, the namespace before a call's name left out (``get_weather:0`` for
        Kimi K2's ``functions.get_weather:0``): read, named (``recovered-bare-id``); with
        only the call's number written (``0``), a call named by its arguments (see
        DerivedShape.id_words). True when read from here, None when it is no such call."""
        if self.stream.strict or self.bare or expect_literal(s, i, word)[0] != FAILED:
            return None
        if NAMED.match(s, i):
            self.todo.pop(0)
            self.opened_by = ""
            self.told.append(
                ("recovered-bare-id", f"read a call whose name is written without its {word}")
            )
            self._then(i)
            return True
        name_end = self.shape.name_end
        if not (s[i].isdigit() and self.shape.id_words and NUMBER in name_end):
            return None
        self.todo.pop(0)
        self.opened_by, self.call_name, self.counter, self.index = "", "", True, -1
        self.scanner = scanner = ObjectScanner()
        scanner.raw_controls = not self.stream.strict
        scanner.stops = self.stream.call_stops
        self.words(name_end[name_end.index(NUMBER) :], _ARGS)
        return True

    def _named_by(self, args: dict[str, Any], text: str, i: int) -> bool:
        """A call written with only its number: named by its arguments, or none."""
        self.counter = False
        name = fitting_tool(self.stream.tools, args)
        if name is None:
            what = f"the call {self.model_id!r} names no tool, and no one declared tool takes"
            self.fail(i, what + " its arguments")
            return False
        self.call_name = name
        self._announce()
        self.stream._args(self.index, text)
        what = f"the call {self.id!r} names no tool: read as a call to {name}, the one declared"
        self.told.append(("recovered-bare-id", what + " tool its arguments fit"))
        return True

    @property
    def deferred(self) -> bool:
        """Whether a name kind's call is not yet announced: the prompt wrote the marker
        (``primed``), or the marker opens text as well as calls (``text_recipients``) and a
        call's name and the words after it were not yet read as written (``>>> print(1)``
        in prose). Such a call is announced once its arguments begin; a block that fails
        before is prose, given back with no notice."""
        if self.shape.kind in ("json", "code"):
            return False
        return self.primed or (bool(self.shape.text_recipients) and not self.headed)
