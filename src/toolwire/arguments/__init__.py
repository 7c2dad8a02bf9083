"""Arguments: read forgivingly, type by the schema, check strictly, explain precisely.

Pure code: text and a schema in, typed values (with every repair named) or an explanation a
model can act on out. :func:`prepare_arguments` is the whole pipeline.
"""

from .pipeline import PreparedArguments, prepare_arguments
from .read import MAX_ARGUMENT_CHARS, MAX_ARGUMENT_DEPTH, ReadResult, read_json

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "MAX_ARGUMENT_DEPTH",
    "PreparedArguments",
    "ReadResult",
    "prepare_arguments",
    "read_json",
]
