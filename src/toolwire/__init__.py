"""toolwire: tool calling that works on every model.

The public surface is what ``__all__`` lists; everything else is private and may move.
"""

from __future__ import annotations

from .arguments import PreparedArguments, prepare_arguments
from .backends import OllamaBackend, OpenAIBackend, Request, stream_sync
from .backends.llamacpp import LlamaCppBackend
from .conversation import Conversation
from .errors import (
    ArgumentsError,
    BackendError,
    FormatError,
    GGUFError,
    LabbookError,
    LimitError,
    ModelNotFoundError,
    StoreError,
    TemplateError,
    TemplateLimitError,
    TemplateSecurityError,
    ToolwireError,
    UsageError,
)
from .events import (
    CallAbort,
    CallArgsDelta,
    CallEnd,
    CallStart,
    Done,
    Event,
    Notice,
    ReasoningDelta,
    TextDelta,
    ToolResult,
    ToolRun,
)
from .formats.base import Family, ParseResult, ReplyStream, assemble
from .formats.detect import Detection, detect_format, resolve_format
from .formats.registry import family_names, get_family
from .loop import run_loop, run_loop_sync
from .mcp import McpConnectError, McpServer, McpSpec, McpToolError
from .messages import ToolCall
from .pipeline import ModelMemory, default_memory
from .store import ConversationStore, StoredConversation
from .templates import ChatTemplate, GGUFInfo, TemplateBudget, load_template, read_gguf
from .tools import (
    Tool,
    Toolbox,
    ToolDefinitionError,
    ToolDenied,
    ToolOutcomeUnknown,
    ToolUnavailable,
)

__version__ = "0.1.0"

__all__ = [
    "ArgumentsError",
    "BackendError",
    "CallAbort",
    "CallArgsDelta",
    "CallEnd",
    "CallStart",
    "ChatTemplate",
    "Conversation",
    "ConversationStore",
    "Detection",
    "Done",
    "Event",
    "Family",
    "FormatError",
    "GGUFError",
    "GGUFInfo",
    "LabbookError",
    "LimitError",
    "LlamaCppBackend",
    "McpConnectError",
    "McpServer",
    "McpSpec",
    "McpToolError",
    "ModelMemory",
    "ModelNotFoundError",
    "Notice",
    "OllamaBackend",
    "OpenAIBackend",
    "ParseResult",
    "PreparedArguments",
    "ReasoningDelta",
    "ReplyStream",
    "Request",
    "StoreError",
    "StoredConversation",
    "TemplateBudget",
    "TemplateError",
    "TemplateLimitError",
    "TemplateSecurityError",
    "TextDelta",
    "Tool",
    "ToolCall",
    "ToolDefinitionError",
    "ToolDenied",
    "ToolOutcomeUnknown",
    "ToolResult",
    "ToolRun",
    "ToolUnavailable",
    "Toolbox",
    "ToolwireError",
    "UsageError",
    "__version__",
    "assemble",
    "default_memory",
    "detect_format",
    "family_names",
    "get_family",
    "load_template",
    "prepare_arguments",
    "read_gguf",
    "resolve_format",
    "run_loop",
    "run_loop_sync",
    "stream_sync",
]
