"""How a family writes literals (:mod:`.pyliteral` reads them): its string delimiter or
Python's quotes, its named constants, bare keys, trailing commas, and whether a quoted
string holds raw line breaks. One :class:`Dialect` a family; :data:`DIALECTS` names them for
a family declared as syntax (``DerivedShape.literal``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DIALECTS", "FUNCTION_GEMMA", "GEMMA", "JSON_VALUES", "PYTHON", "Dialect"]


@dataclass(frozen=True)
class Dialect:
    """How one family writes literals."""

    #: The string delimiter, or "" for Python's quotes (``'``, ``"`` and their triples).
    string_delimiter: str
    #: The named constants and their values.
    words: Mapping[str, Any] = field(default_factory=dict)
    #: Mapping keys may be written bare, up to the ``:`` (Gemma).
    bare_keys: bool = False
    #: A comma may follow the last item of a list or mapping.
    trailing_comma: bool = False
    #: A quoted string may hold raw line breaks and tabs (Python's, as LFM2.5's template
    #: writes values verbatim between quotes). Else (JSON's, as ``tojson`` writes values) they
    #: are a repair, read unless the reader is strict (``raw_controls`` says so), and any
    #: other control character breaks the value.
    raw_strings: bool = True
    #: Python's tuples, ``(1, 2)``: read as lists (JSON has no tuple).
    tuples: bool = False


PYTHON = Dialect(
    "",
    {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None},
    trailing_comma=True,
    tuples=True,
)
GEMMA = Dialect('<|"|>', {"true": True, "false": False, "null": None, "None": None}, bare_keys=True)
#: FunctionGemma: Gemma's syntax, strings between ``<escape>`` delimiters.
FUNCTION_GEMMA = Dialect(
    "<escape>", {"true": True, "false": False, "null": None, "None": None}, bare_keys=True
)
#: Python calls whose values a template writes through ``tojson`` (MiniCPM3's): JSON's
#: strings, Python's read too.
JSON_VALUES = Dialect("", PYTHON.words, trailing_comma=True, raw_strings=False, tuples=True)
#: The dialects by name, for a family declared as syntax (``DerivedShape.literal``).
DIALECTS = {
    "python": PYTHON,
    "json": JSON_VALUES,
    "gemma": GEMMA,
    "function-gemma": FUNCTION_GEMMA,
}
