"""toolwire: tool calling that works on every model.

The public surface is what ``__all__`` lists; everything else is private and may move.
"""

from __future__ import annotations

from .arguments import PreparedArguments, prepare_arguments
from .errors import (
    ArgumentsError,
    FormatError,
    GGUFError,
    LimitError,
    ModelNotFoundError,
    TemplateError,
    TemplateSecurityError,
    ToolwireError,
)
from .events import (
    CallAbort,
    CallArgsDelta,
    CallEnd,
    CallStart,
    Event,
    Notice,
    ReasoningDelta,
    TextDelta,
)
from .formats.base import Family, ParseResult, ReplyStream, assemble
from .formats.detect import Detection, detect_format, resolve_format
from .formats.registry import family_names, get_family
from .messages import ToolCall
from .templates import ChatTemplate, GGUFInfo, load_template, read_gguf

__version__ = "0.1.0"

__all__ = [
    "ArgumentsError",
    "CallAbort",
    "CallArgsDelta",
    "CallEnd",
    "CallStart",
    "ChatTemplate",
    "Detection",
    "Event",
    "Family",
    "FormatError",
    "GGUFError",
    "GGUFInfo",
    "LimitError",
    "ModelNotFoundError",
    "Notice",
    "ParseResult",
    "PreparedArguments",
    "ReasoningDelta",
    "ReplyStream",
    "TemplateError",
    "TemplateSecurityError",
    "TextDelta",
    "ToolCall",
    "ToolwireError",
    "__version__",
    "assemble",
    "detect_format",
    "family_names",
    "get_family",
    "load_template",
    "prepare_arguments",
    "read_gguf",
    "resolve_format",
]
