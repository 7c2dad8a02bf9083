"""``toolwire parse`` and ``args``: a model's reply read in one family's grammar, and a
call's arguments read, typed and checked by their schema.

Neither reaches a model: they load the formats and the argument reader, nothing of the
gateway, the engine or the HTTP client."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ArgumentsError, UsageError
from .common import FORMAT_HELP, format_name, print_json, read_json, read_tools

if TYPE_CHECKING:
    from ..formats.base import Family, ParseResult, ToolIndex
    from ..messages import ToolCall

__all__ = ["add_args", "add_parse"]

#: The lenient reader's name (``formats.words.Words.name``: a test keeps them one).
WORDS = "words"


def add_parse(q: argparse.ArgumentParser) -> None:
    q.add_argument(
        "--format",
        required=True,
        type=format_name(WORDS, "none"),
        metavar="FORMAT",
        help=f"{FORMAT_HELP}; {WORDS}: the lenient reader for tools given in words; none: no calls",
    )
    q.add_argument(
        "--tools", help="JSON file with the tools (types the arguments, with their repairs)"
    )
    q.add_argument(
        "--chunk", type=int, default=0, help="feed the stream parser N characters at a time"
    )
    q.add_argument(
        "--reasoning-open", action="store_true", help="the prompt already opened a thinking block"
    )
    q.set_defaults(run=_cmd_parse)


def add_args(a: argparse.ArgumentParser) -> None:
    a.add_argument(
        "--schema",
        required=True,
        help="JSON file: the tool (OpenAI or bare form) or its parameters schema",
    )
    a.add_argument("--strict", action="store_true", help="refuse any repair or normalisation")
    a.add_argument("--name", help="the tool's name in explanations")
    a.set_defaults(run=_cmd_args)


def _call_json(call: ToolCall, schemas: ToolIndex | None, notices: list[str]) -> dict[str, Any]:
    """A call as ``parse`` prints it: with tools given, its arguments typed by the tool's
    schema (the one way toolwire types them), and what that changed."""
    out: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments}
    if schemas is None:
        return out
    out["repairs"], out["dropped"] = [], []
    schema = schemas.schema(call.name)
    if schema is None:
        notices.append(f"{call.name} is not one of the tools given: its arguments are as written")
        return out
    raw: str | dict[str, Any] = (
        call.arguments_text if call.arguments_text.strip() else call.arguments
    )
    from ..arguments import prepare_arguments  # (the schema checker: only with tools)

    try:
        done = prepare_arguments(raw, schema, name=call.name, text_values=call.text_values)
    except ArgumentsError as exc:
        notices.append(exc.explanation)
        return out
    out.update(arguments=done.arguments, repairs=list(done.repairs), dropped=list(done.dropped))
    return out


def _result_json(result: ParseResult, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    notices = list(result.notices)
    from ..formats.base import ToolIndex

    schemas = None if tools is None else ToolIndex(tools)
    calls = [_call_json(c, schemas, notices) for c in result.calls]
    return {
        "content": result.content,
        "calls": calls,
        "reasoning": result.reasoning,
        "notices": notices,
    }


def _cmd_parse(args: argparse.Namespace) -> int:
    from ..formats.base import ParseResult, assemble
    from ..formats.registry import get_family

    text = sys.stdin.read()
    tools = read_tools(args.tools)
    if args.format == "none":
        result = ParseResult(text)
    else:
        if args.format == WORDS:  # (the reader for tools in words: loaded only for them)
            from ..formats.words import Words

            family: Family = Words()
        else:
            family = get_family(args.format)
        if args.chunk:
            if args.chunk < 1:
                raise UsageError("--chunk takes a positive number of characters")
            stream = family.stream(tools, reasoning_open=args.reasoning_open)
            events = []
            for start in range(0, len(text), args.chunk):
                events += stream.feed(text[start : start + args.chunk])
            events += stream.finish()
            result = assemble(events)
        else:
            result = family.parse(text, tools, reasoning_open=args.reasoning_open)
    print_json(_result_json(result, tools))
    return 0


def _cmd_args(args: argparse.Namespace) -> int:
    from ..arguments import prepare_arguments

    data = read_json(args.schema, "schema")
    if not isinstance(data, dict):
        raise UsageError(f"schema file {args.schema} must hold a JSON object")
    tool = data.get("function", data) if data.get("type") == "function" else data
    if "parameters" in tool and isinstance(tool["parameters"], dict):
        schema, name = tool["parameters"], tool.get("name")
    else:
        schema, name = data, None
    try:
        done = prepare_arguments(
            sys.stdin.read(), schema, strict=args.strict, name=args.name or name or "the tool"
        )
    except ArgumentsError as exc:
        if exc.kind == "schema":
            raise
        print(exc.explanation)
        return 1
    out = {
        "arguments": done.arguments,
        "repairs": list(done.repairs),
        "dropped": list(done.dropped),
    }
    print_json(out)
    return 0
