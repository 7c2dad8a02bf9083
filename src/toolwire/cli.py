"""The ``toolwire`` command: a thin shell over the library.

``detect`` names the tool-call format a template teaches; ``doctor`` checks that calls go
through the template and back exactly, one line per check (exit 1 when they do not);
``render`` prints the prompt a
template makes of a conversation; ``parse`` reads a reply in one family's grammar (or with
the reader for tools in words), whole or as a stream of chunks, and with the tools given
prints each call's arguments typed by its schema, with the repairs that took; ``args`` reads
a call's arguments, types and checks them, or prints the explanation a model would get
(exit 1); ``models`` lists the models known by name; ``chat --conversation NAME`` keeps a
chat in the conversation store, and ``conversations`` lists, shows, exports and deletes what
it keeps (:mod:`toolwire.store.command`). Wherever a local GGUF model is taken,
a known name (``qwen2.5-coder-1.5b``) works as well as a path. Other errors are one line on
stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .arguments import prepare_arguments
from .bench.command import add_bench_command
from .errors import ArgumentsError, ToolwireError, UsageError
from .formats.base import ParseResult, assemble
from .formats.detect import detect_format
from .formats.registry import FORMAT_SETTINGS, family_names, get_family
from .formats.words import Words
from .messages import ToolCall
from .server.command import add_serve_command
from .store.command import add_conversations_command
from .templates import ChatTemplate, TemplateBudget, load_template
from .templates.shaping import CallIds

__all__ = ["main"]


#: ``parse --format words``: the reader for tools in words, for a model with no tool format.
_WORDS = Words.name


def _read_json(path: str, what: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {what} file {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{what} file {path} is not JSON: {exc}") from None


def _messages(path: str) -> list[dict[str, Any]]:
    data = _read_json(path, "messages")
    if isinstance(data, dict) and "messages" in data:
        data = data["messages"]
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise UsageError(f"messages file {path} must hold a list of message objects")
    return data


def _tools(path: str | None) -> list[dict[str, Any]] | None:
    if path is None:
        return None
    data = _read_json(path, "tools")
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list) or not all(isinstance(t, dict) for t in data):
        raise UsageError(f"tools file {path} must hold a list of tool objects")
    return data


def local_model(name_or_path: str | None) -> Path:
    """The GGUF file a local-model argument names: a known model, a path, or the default."""
    from .models import default_model_path, resolve_model

    return resolve_model(name_or_path) if name_or_path else default_model_path()


def _template(path: str | None) -> tuple[ChatTemplate, str]:
    from .models import known_model

    if path is None or known_model(path) or not Path(path).is_file():
        model = local_model(path)  # a name, or the error that names the known models
        return load_template(model), str(model)
    return load_template(path), path


def _cmd_detect(args: argparse.Namespace) -> int:
    template, source = _template(args.path)
    found = detect_format(template)
    print(found.format)
    if args.json:
        family = found.family
        print(
            json.dumps(
                {
                    "format": found.format,
                    "via": found.via,
                    "label": family.label if family else "no tool-call format found",
                    "shape": found.shape.to_json() if found.shape else None,
                    "source": source,
                    "template": template.name,
                    "sha256": template.sha256,
                    "reasoning_open": found.reasoning_open,
                    "call_text": found.call_text,
                    "candidates": list(found.candidates),
                    "errors": list(found.errors),
                },
                ensure_ascii=False,
                indent=2,
            )
        )
    return 0


#: How ``doctor`` marks a check: held, failed, or failed but only advice; in ASCII for a
#: terminal that cannot show the marks.
_MARKS = {"ok": "✓", "fail": "✗", "advice": "!"}
_ASCII_MARKS = {"ok": "ok", "fail": "FAIL", "advice": "warn"}


def _doctor_lines(source: str, report: Any, marks: dict[str, str]) -> str:
    lines = [f"{source} (template {report.template})"]
    for check in report.checks:
        state = "ok" if check.ok else "fail" if check.required else "advice"
        message = " ".join(check.message.splitlines())  # one check, one line
        lines.append(f"{marks[state]} {check.name}: {message}")
    lines.append(report.verdict)
    return "\n".join(lines)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import diagnose

    template, source = _template(args.path)
    report = diagnose(template)
    if args.json:
        print_json({"source": source, **report.to_json()})
    else:
        try:
            print(_doctor_lines(source, report, _MARKS))
        except UnicodeEncodeError:
            text = _doctor_lines(source, report, _ASCII_MARKS)
            print(text.encode("ascii", "backslashreplace").decode())
    return 0 if report.ok else 1


def _cmd_render(args: argparse.Namespace) -> int:
    template, _ = _template(args.path)
    tools = _tools(args.tools)
    budget = TemplateBudget()  # one for the command: detection's renders and the prompt's
    family = detect_format(template, budget=budget).family
    call_ids: CallIds = args.call_ids or (family.call_ids if family else "keep")
    prompt = template.render(
        _messages(args.messages),
        tools,
        add_generation_prompt=not args.no_generation_prompt,
        enable_thinking=args.enable_thinking,
        call_ids=call_ids,
        budget=budget,
    )
    sys.stdout.write(prompt)
    if not prompt.endswith("\n"):
        sys.stdout.write("\n")
    return 0


def print_json(data: Any) -> None:
    """JSON on stdout; text the terminal cannot encode (a lone surrogate a model sent as an
    escape) is written as JSON escapes instead of failing."""
    text = json.dumps(data, ensure_ascii=False, indent=2)
    try:
        print(text)
    except UnicodeEncodeError:
        print(json.dumps(data, ensure_ascii=True, indent=2))


def _schemas(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Each tool's parameters schema by name."""
    out: dict[str, Any] = {}
    for tool in tools:
        fn = tool.get("function", tool)
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out[fn["name"]] = params if isinstance(params, dict) else {}
    return out


def _call_json(
    call: ToolCall, schemas: dict[str, Any] | None, notices: list[str]
) -> dict[str, Any]:
    """A call as ``parse`` prints it: with tools given, its arguments typed by the tool's
    schema (the one way toolwire types them), and what that changed."""
    out: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments}
    if schemas is None:
        return out
    out["repairs"], out["dropped"] = [], []
    schema = schemas.get(call.name)
    if schema is None:
        notices.append(f"{call.name} is not one of the tools given: its arguments are as written")
        return out
    raw: str | dict[str, Any] = (
        call.arguments_text if call.arguments_text.strip() else call.arguments
    )
    try:
        done = prepare_arguments(raw, schema, name=call.name, text_values=call.text_values)
    except ArgumentsError as exc:
        notices.append(exc.explanation)
        return out
    out.update(arguments=done.arguments, repairs=list(done.repairs), dropped=list(done.dropped))
    return out


def _result_json(result: ParseResult, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    notices = list(result.notices)
    schemas = None if tools is None else _schemas(tools)
    calls = [_call_json(c, schemas, notices) for c in result.calls]
    return {
        "content": result.content,
        "calls": calls,
        "reasoning": result.reasoning,
        "notices": notices,
    }


def _cmd_parse(args: argparse.Namespace) -> int:
    text = sys.stdin.read()
    tools = _tools(args.tools)
    if args.format == "none":
        result = ParseResult(text)
    else:
        family = Words() if args.format == _WORDS else get_family(args.format)
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
    data = _read_json(args.schema, "schema")
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


def _backend(args: argparse.Namespace, memory: Any = None) -> Any:
    from .backends import OllamaBackend, OpenAIBackend

    if args.ollama is not None:
        if not args.model:
            raise UsageError("--ollama needs --model NAME")
        return OllamaBackend(args.model, base_url=args.ollama, memory=memory)
    if args.base_url:
        if not args.model:
            raise UsageError("--base-url needs --model NAME")
        key = args.api_key or os.environ.get("OPENAI_API_KEY")
        return OpenAIBackend(args.model, base_url=args.base_url, api_key=key, memory=memory)
    from .backends.llamacpp import LlamaCppBackend

    path = local_model(args.model_path)
    return LlamaCppBackend(
        path, n_ctx=args.ctx, tool_format=args.tool_format or "auto", memory=memory
    )


def _cmd_chat(args: argparse.Namespace) -> int:
    from .chat import chat

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
    conversation = memory = None
    if args.conversation:  # resumed with its settings, or made keeping these
        from .store.command import open_for_chat

        conversation, memory = open_for_chat(args.conversation, settings)
    backend = _backend(args, memory)
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
    from .mcp_cli import chat_tools

    def warn(line: str) -> None:
        print(f"toolwire: {line}", file=sys.stderr, flush=True)

    return chat_tools(
        args.mcp or [], args.mcp_config, yes=args.yes, stdin=sys.stdin, out=sys.stdout, warn=warn
    )


def _cmd_models(args: argparse.Namespace) -> int:
    from .catalog import list_models, models_text

    models = list_models(labbook=args.labbook, verify=args.verify)
    if args.json:
        print_json(models)
    else:
        print(models_text(models, labbook=args.labbook))
    return 0


_MODEL_HELP = "a GGUF file or a known model's name (default: the default local model)"
_TEMPLATE_HELP = ".jinja or .gguf file, or a known model's name (default: the default model)"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="toolwire", description="Tool calling that works on every model."
    )
    p.add_argument("--version", action="version", version=f"toolwire {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("detect", help="name the tool-call format a chat template teaches")
    d.add_argument("path", nargs="?", help=_TEMPLATE_HELP)
    d.add_argument("--json", action="store_true", help="details as JSON after the first line")
    d.set_defaults(run=_cmd_detect)

    o = sub.add_parser(
        "doctor", help="check that tool calling works through a template, and say why not"
    )
    o.add_argument("path", nargs="?", help=_TEMPLATE_HELP)
    o.add_argument("--json", action="store_true", help="the checks as JSON")
    o.set_defaults(run=_cmd_doctor)

    r = sub.add_parser("render", help="print the prompt a template makes of a conversation")
    r.add_argument("path", nargs="?", help=_TEMPLATE_HELP)
    r.add_argument("--messages", required=True, help="JSON file with the messages ('-': stdin)")
    r.add_argument("--tools", help="JSON file with the tools")
    r.add_argument("--no-generation-prompt", action="store_true")
    think = r.add_mutually_exclusive_group()
    think.add_argument(
        "--enable-thinking", dest="enable_thinking", action="store_true", default=None
    )
    think.add_argument("--disable-thinking", dest="enable_thinking", action="store_false")
    r.add_argument(
        "--call-ids",
        choices=("keep", "alnum9"),
        help="how call ids reach the template (default: what the format needs)",
    )
    r.set_defaults(run=_cmd_render)

    q = sub.add_parser("parse", help="read a model's reply (stdin) in one family's grammar")
    q.add_argument(
        "--format",
        required=True,
        choices=[*family_names(), _WORDS, FORMAT_SETTINGS[1]],
        help="the family; words: the lenient reader for tools given in words",
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

    a = sub.add_parser("args", help="read, type and check a call's arguments (stdin)")
    a.add_argument(
        "--schema",
        required=True,
        help="JSON file: the tool (OpenAI or bare form) or its parameters schema",
    )
    a.add_argument("--strict", action="store_true", help="refuse any repair or normalisation")
    a.add_argument("--name", help="the tool's name in explanations")
    a.set_defaults(run=_cmd_args)

    c = sub.add_parser(
        "chat", help="chat with a model that can use a few safe demo tools, or MCP servers' tools"
    )
    c.add_argument("--once", metavar="PROMPT", help="answer one prompt and exit")
    c.add_argument("--model-path", help=_MODEL_HELP)
    c.add_argument("--base-url", help="an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1")
    c.add_argument("--model", help="the model name at --base-url or Ollama")
    c.add_argument("--api-key", help="the server's key (default: $OPENAI_API_KEY)")
    c.add_argument(
        "--ollama",
        nargs="?",
        const="http://127.0.0.1:11434",
        metavar="URL",
        help="Ollama's native API (default URL http://127.0.0.1:11434)",
    )
    c.add_argument("--max-tokens", type=int, default=512)
    c.add_argument("--temperature", type=float)
    c.add_argument("--max-tool-iters", type=int)
    c.add_argument("--read-only", action="store_true")
    c.add_argument("--tool-format", choices=[*FORMAT_SETTINGS, *family_names()])
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

    add_serve_command(sub, model_help=_MODEL_HELP)

    m = sub.add_parser("models", help="the models known by name: installed? measured?")
    m.add_argument("--json", action="store_true", help="the list as JSON")
    m.add_argument(
        "--labbook", metavar="FILE", help="a labbook bench --labbook wrote: each model's last run"
    )
    m.add_argument("--verify", action="store_true", help="check installed models' bytes first")
    m.set_defaults(run=_cmd_models)

    add_bench_command(sub, model_help=_MODEL_HELP)
    add_conversations_command(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except ToolwireError as exc:
        print(f"toolwire: error: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
