"""``toolwire chat``: a conversation in the terminal with a model that can use a few safe
demo tools, or the tools of MCP servers (the chat itself is :mod:`toolwire.chat`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import (
    FORMAT_HELP,
    MODEL_HELP,
    OLLAMA_HELP,
    OLLAMA_URL,
    backend_spec,
    format_name,
    warn,
)

__all__ = ["add_chat"]


def add_chat(c: argparse.ArgumentParser) -> None:
    c.add_argument("--once", metavar="PROMPT", help="answer one prompt and exit")
    c.add_argument("--model-path", help=MODEL_HELP)
    c.add_argument("--base-url", help="an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1")
    c.add_argument("--model", help="the model name at --base-url or Ollama")
    c.add_argument("--api-key", help="the server's key (default: $OPENAI_API_KEY)")
    c.add_argument("--ollama", nargs="?", const=OLLAMA_URL, metavar="URL", help=OLLAMA_HELP)
    c.add_argument("--max-tokens", type=int, default=512)
    c.add_argument("--temperature", type=float)
    c.add_argument("--max-tool-iters", type=int)
    c.add_argument("--read-only", action="store_true")
    c.add_argument(
        "--tool-format",
        type=format_name("auto", "none"),
        metavar="FORMAT",
        help=f"{FORMAT_HELP}, auto (found from the template) or none",
    )
    c.add_argument("--think", action="store_true", help="let a thinking model think")
    c.add_argument("--ctx", type=int, default=4096, help="context size of a local model")
    c.add_argument(
        "--conversation",
        metavar="NAME",
        help="keep the chat as NAME in the store, or resume NAME with its settings",
    )
    c.add_argument(
        "--mcp",
        action="append",
        metavar="COMMAND|URL",
        help="an MCP server's tools instead of the demo tools: a command run over stdio "
        '(quoted, e.g. "python server.py") or a streamable HTTP URL; repeatable',
    )
    c.add_argument(
        "--mcp-config", metavar="FILE", help="a TOML file listing MCP servers ([[mcp]] tables)"
    )
    c.add_argument(
        "--yes", action="store_true", help="run destructive MCP tools without asking first"
    )
    c.set_defaults(run=_cmd_chat)


def _cmd_chat(args: argparse.Namespace) -> int:
    from ..backends.factory import build_backend
    from ..chat import chat

    settings: dict[str, Any] = {"read_only": True} if args.read_only else {}
    if args.max_tool_iters is not None:
        settings["max_tool_iters"] = args.max_tool_iters
    if args.tool_format:
        settings["tool_format"] = args.tool_format
    options: dict[str, Any] = {"max_tokens": args.max_tokens}
    if args.temperature is not None:
        options["temperature"] = args.temperature
    if args.think:
        options["think"] = True
    spec = backend_spec(
        local=args.model_path,
        base_url=args.base_url,
        ollama=args.ollama,
        model=args.model,
        api_key=args.api_key,
        ctx=args.ctx,
        tool_format=args.tool_format,
    )
    conversation = memory = None
    if args.conversation:  # resumed with its settings, or made keeping these
        from .conversations import open_for_chat

        conversation, memory = open_for_chat(args.conversation, settings)
    backend = build_backend(spec, memory=memory)
    if conversation is not None:
        conversation.model = backend.model
    with _mcp_tools(args) as (toolbox, confirm):
        return chat(
            backend,
            once=args.once,
            settings=settings,
            request_options=options,
            conversation=conversation,
            toolbox=toolbox,
            confirm=confirm,
        )


def _mcp_tools(args: argparse.Namespace) -> Any:
    """``--mcp`` and ``--mcp-config``: their tools replace the demo tools."""
    from ..mcp_cli import chat_tools

    return chat_tools(
        args.mcp or [], args.mcp_config, yes=args.yes, stdin=sys.stdin, out=sys.stdout, warn=warn
    )
