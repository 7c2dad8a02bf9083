"""The ``toolwire`` command: a thin shell over the library.

``detect`` names the tool-call format a template teaches; ``doctor`` checks that calls go
through the template and back exactly, one line per check (exit 1 when they do not);
``render`` prints the prompt a template makes of a conversation (:mod:`.template`);
``parse`` reads a reply in one family's grammar (or with the reader for tools in words),
whole or as a stream of chunks, and with the tools given prints each call's arguments typed
by its schema, with the repairs that took; ``args`` reads a call's arguments, types and
checks them, or prints the explanation a model would get (exit 1) (:mod:`.read`);
``chat`` talks to a model with demo or MCP tools (:mod:`.chat`); ``serve`` is the gateway
(:mod:`.serve`); ``launch`` starts a coding agent through it (:mod:`.launch`);
``families`` lists the tool-call families from their declarations
(:mod:`.families`); ``models`` lists the models known by name (:mod:`.models`); ``bench``
measures a model (:mod:`.bench`); ``chat --conversation NAME`` keeps a chat in the
conversation store, and ``conversations`` lists, shows, exports and deletes what it keeps
(:mod:`.conversations`). Wherever a local GGUF model is taken, a known name
(``qwen2.5-coder-1.5b``) works as well as a path. Other errors are one line on stderr,
exit 2.

Starting is cheap: the command line is built from this table, and only the command being
run gets its arguments (its module imported then); each command imports what it runs on
(the gateway, the engine, the HTTP client) only when it runs. ``toolwire --help`` loads
none of them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..errors import ToolwireError

__all__ = ["main"]

#: Each command: its name, its line in ``toolwire --help``, and the module of this package
#: whose ``add_<name>`` function gives it its arguments and what it runs.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("detect", "name the tool-call format a chat template teaches", "template"),
    ("doctor", "check that tool calling works through a template, and say why not", "template"),
    ("render", "print the prompt a template makes of a conversation", "template"),
    ("parse", "read a model's reply (stdin) in one family's grammar", "read"),
    ("args", "read, type and check a call's arguments (stdin)", "read"),
    (
        "chat",
        "chat with a model that can use a few safe demo tools, or MCP servers' tools",
        "chat",
    ),
    ("serve", "an OpenAI-compatible gateway with working tool calls", "serve"),
    (
        "launch",
        "start a coding agent (claude, codex, opencode, qwen, gemini) on any model",
        "launch",
    ),
    ("families", "the tool-call families: models, markers, thinking, constrained", "families"),
    ("models", "the models known by name: installed? measured?", "models"),
    ("bench", "measure how reliably a model and engine call tools", "bench"),
    (
        "conversations",
        "the conversations `chat --conversation NAME` keeps ($TOOLWIRE_HOME)",
        "conversations",
    ),
)


def _command_in(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs: its first word that is not an option (the top level takes
    only options without values: ``--help``, ``--version``)."""
    return next((word for word in argv if not word.startswith("-")), None)


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line. With ``argv``, only the command it runs gets its arguments (the
    others are listed by name and help); without, every command does."""
    from .. import __version__

    wanted = None if argv is None else _command_in(argv)
    p = argparse.ArgumentParser(
        prog="toolwire", description="Tool calling that works on every model."
    )
    p.add_argument("--version", action="version", version=f"toolwire {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for name, line, module in COMMANDS:
        command = sub.add_parser(name, help=line)
        if argv is None or name == wanted:
            add = getattr(importlib.import_module(f"{__name__}.{module}"), f"add_{name}")
            add(command)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code (2, and one line on stderr, for a toolwire error)."""
    words = list(sys.argv[1:] if argv is None else argv)
    rest: list[str] = []
    if _command_in(words) == "launch" and "--" in words:  # the agent's own arguments
        at = words.index("--")
        words, rest = words[:at], words[at + 1 :]
    args = _parser(words).parse_args(words)
    if rest:
        args.rest = rest
    try:
        code: int = args.run(args)
    except ToolwireError as exc:
        print(f"toolwire: error: {exc}", file=sys.stderr)
        return 2
    return code
