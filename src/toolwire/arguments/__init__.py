"""Arguments: read forgivingly, type by the schema, check strictly, explain precisely.

Pure code: text and a schema in, typed values (with every repair named) or an explanation a
model can act on out. :func:`prepare_arguments` is the whole pipeline.

Each name is imported on first use (PEP 562): a reader that needs only the almost-JSON
reader does not load the schema checker.
"""

from __future__ import annotations

import typing as _typing

from toolwire.lazy import lazy_names

if _typing.TYPE_CHECKING:
    from .pipeline import PreparedArguments, prepare_arguments
    from .read import MAX_ARGUMENT_CHARS, MAX_ARGUMENT_DEPTH, ReadResult, read_json

_HOMES = {
    "MAX_ARGUMENT_CHARS": "read",
    "MAX_ARGUMENT_DEPTH": "read",
    "PreparedArguments": "pipeline",
    "ReadResult": "read",
    "prepare_arguments": "pipeline",
    "read_json": "read",
}

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "MAX_ARGUMENT_DEPTH",
    "PreparedArguments",
    "ReadResult",
    "prepare_arguments",
    "read_json",
]

__getattr__ = lazy_names(__name__, _HOMES)
