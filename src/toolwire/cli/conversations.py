"""``toolwire conversations list|show|export|delete`` and the store's part in ``toolwire chat
--conversation NAME``. The store is ``toolwire.db`` under ``$TOOLWIRE_HOME``
(:mod:`toolwire.store`), opened only when a command runs."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

from .common import print_json

if TYPE_CHECKING:
    from ..pipeline import ModelMemory
    from ..store import StoredConversation

__all__ = ["add_conversations", "open_for_chat"]

#: ``export`` writes this version of its JSON shape (the conversation's, with this key).
EXPORT_VERSION = 1


def open_for_chat(
    name: str, flags: Mapping[str, Any], *, err: TextIO | None = None
) -> tuple[StoredConversation, ModelMemory]:
    """The conversation ``name`` (made now, keeping ``flags``, or resumed) and a model memory
    kept in the same store. On resume a flag that differs from the conversation's own
    setting is for this run only, and a line on ``err`` says so."""
    from ..pipeline import ModelMemory
    from ..store import ConversationStore

    store = ConversationStore()
    conversation = store.open(name, settings=flags)
    for key, value in flags.items():
        kept = conversation.settings.get(key, value)
        if kept != value:
            print(
                f"toolwire: conversation {name}: {key} {value!r} for this run; "
                f"the conversation keeps {kept!r}",
                file=err or sys.stderr,
            )
    return conversation, ModelMemory(store=store)


def _text(conversation: StoredConversation) -> str:
    s = conversation.settings
    kept = ", ".join(
        f"{k} {s[k]}" for k in ("tool_format", "strict", "read_only", "max_tool_iters") if k in s
    )
    lines = [
        f"{conversation.name} · model {conversation.model or '?'} · {kept}",
        f"made {conversation.created} · updated {conversation.updated} · "
        f"{len(conversation.messages)} messages",
    ]
    for message in conversation.messages:
        role = message.get("role", "?")
        content = message.get("content")
        text = content if isinstance(content, str) or content is None else json.dumps(content)
        text = text or ""
        if role == "tool":
            lines.append(f"  ← {message.get('name') or message.get('tool_call_id')}: {text}")
            continue
        if text:
            lines.append(f"{role}: {text}")
        for call in message.get("tool_calls") or ():
            fn = call.get("function", {}) if isinstance(call, Mapping) else {}
            lines.append(f"  → {fn.get('name')}({fn.get('arguments')})")
    return "\n".join(lines)


def _cmd_list(args: Any) -> int:
    from ..store import ConversationStore

    store = ConversationStore()
    rows = store.summaries()
    if args.json:
        print_json(rows)
    elif not rows:
        print(f"no conversations yet in {store.path}")
    for row in rows if not args.json else ():
        print(f"{row['name']}\t{row['messages']} messages\t{row['model'] or '?'}\t{row['updated']}")
    return 0


def _cmd_show(args: Any) -> int:
    from ..store import ConversationStore

    conversation = ConversationStore().get(args.name)
    if args.json:
        print_json(conversation.to_json())
    else:
        print(_text(conversation))
    return 0


def _cmd_export(args: Any) -> int:
    from ..store import ConversationStore

    print_json(
        {"toolwire_conversation": EXPORT_VERSION, **ConversationStore().get(args.name).to_json()}
    )
    return 0


def _cmd_delete(args: Any) -> int:
    from ..store import ConversationStore

    ConversationStore().delete(args.name)
    print(f"deleted {args.name}")
    return 0


def add_conversations(c: argparse.ArgumentParser) -> None:
    """The four commands of ``conversations``."""
    more = c.add_subparsers(dest="action", required=True, metavar="list|show|export|delete")
    listing = more.add_parser("list", help="every conversation, latest first")
    listing.add_argument("--json", action="store_true", help="the list as JSON")
    listing.set_defaults(run=_cmd_list)
    show = more.add_parser("show", help="a conversation's settings and messages")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="as one JSON object, every message")
    show.set_defaults(run=_cmd_show)
    export = more.add_parser("export", help="a conversation as JSON, to keep or move")
    export.add_argument("name")
    export.set_defaults(run=_cmd_export)
    delete = more.add_parser("delete", help="delete a conversation and its messages")
    delete.add_argument("name")
    delete.set_defaults(run=_cmd_delete)
