"""toolwire: tool calling that works on every model.

The public surface is what ``__all__`` lists; everything else is private and may move.

Each public name is imported when it is first used (PEP 562): importing one part of toolwire
(the command line, a format's parser) loads only that part, not the HTTP client, the engine,
the gateway or the MCP SDK, so ``toolwire --help`` starts in a blink.
"""

from __future__ import annotations

import importlib
import typing as _typing

if _typing.TYPE_CHECKING:
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
    from .pipeline import ModelMemory, Sampling, default_memory
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

#: The module each public name lives in, imported on first use.
_HOMES = {
    "ArgumentsError": "toolwire.errors",
    "BackendError": "toolwire.errors",
    "CallAbort": "toolwire.events",
    "CallArgsDelta": "toolwire.events",
    "CallEnd": "toolwire.events",
    "CallStart": "toolwire.events",
    "ChatTemplate": "toolwire.templates",
    "Conversation": "toolwire.conversation",
    "ConversationStore": "toolwire.store",
    "Detection": "toolwire.formats.detect",
    "Done": "toolwire.events",
    "Event": "toolwire.events",
    "Family": "toolwire.formats.base",
    "FormatError": "toolwire.errors",
    "GGUFError": "toolwire.errors",
    "GGUFInfo": "toolwire.templates",
    "LabbookError": "toolwire.errors",
    "LimitError": "toolwire.errors",
    "LlamaCppBackend": "toolwire.backends.llamacpp",
    "McpConnectError": "toolwire.mcp",
    "McpServer": "toolwire.mcp",
    "McpSpec": "toolwire.mcp",
    "McpToolError": "toolwire.mcp",
    "ModelMemory": "toolwire.pipeline",
    "ModelNotFoundError": "toolwire.errors",
    "Notice": "toolwire.events",
    "OllamaBackend": "toolwire.backends",
    "OpenAIBackend": "toolwire.backends",
    "ParseResult": "toolwire.formats.base",
    "PreparedArguments": "toolwire.arguments",
    "ReasoningDelta": "toolwire.events",
    "ReplyStream": "toolwire.formats.base",
    "Request": "toolwire.backends",
    "Sampling": "toolwire.pipeline",
    "StoreError": "toolwire.errors",
    "StoredConversation": "toolwire.store",
    "TemplateBudget": "toolwire.templates",
    "TemplateError": "toolwire.errors",
    "TemplateLimitError": "toolwire.errors",
    "TemplateSecurityError": "toolwire.errors",
    "TextDelta": "toolwire.events",
    "Tool": "toolwire.tools",
    "ToolCall": "toolwire.messages",
    "ToolDefinitionError": "toolwire.tools",
    "ToolDenied": "toolwire.tools",
    "ToolOutcomeUnknown": "toolwire.tools",
    "ToolResult": "toolwire.events",
    "ToolRun": "toolwire.events",
    "ToolUnavailable": "toolwire.tools",
    "Toolbox": "toolwire.tools",
    "ToolwireError": "toolwire.errors",
    "UsageError": "toolwire.errors",
    "assemble": "toolwire.formats.base",
    "default_memory": "toolwire.pipeline",
    "detect_format": "toolwire.formats.detect",
    "family_names": "toolwire.formats.registry",
    "get_family": "toolwire.formats.registry",
    "load_template": "toolwire.templates",
    "prepare_arguments": "toolwire.arguments",
    "read_gguf": "toolwire.templates",
    "resolve_format": "toolwire.formats.detect",
    "run_loop": "toolwire.loop",
    "run_loop_sync": "toolwire.loop",
    "stream_sync": "toolwire.backends",
}

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
    "Sampling",
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


def __getattr__(name: str) -> object:
    """A public name, imported from its module now (then kept here); a subpackage by name
    too, as ``toolwire.events`` was reachable when everything was imported up front."""
    home = _HOMES.get(name)
    if home is None:
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
