"""Tools in words: the tool list in the system prompt, calls and results as text.

For a model without native tool calling (a template with no tool format, a provider that
refuses tools), the tools are listed in the system prompt and the model is asked to call
them in the Hermes form, which many small models already know. The list fits the window:
full descriptions while they take at most 15% of the context, first sentences up to 25%,
names and arguments up to 40%; a window that cannot hold even that gets no tools, and a
notice says so. Results go back as the next user message in ``<tool_response>`` blocks that
a tool's own text cannot close. Earlier native calls in the transcript are shown in the same
words; the stored transcript itself is not changed.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .arguments.explain import signature
from .templates import normalize_tools

__all__ = ["TIERS", "tools_in_words", "transcript_in_words"]

#: (share of the context, how much of each tool is shown)
TIERS = ((0.15, "full"), (0.25, "first-sentence"), (0.40, "names"))

_INSTRUCTIONS = (
    "You can call tools. To call one, reply with exactly this and nothing after it:\n"
    '<tool_call>\n{{"name": "tool_name", "arguments": {{"parameter": "value"}}}}\n'
    "</tool_call>\n"
    "You may make several calls, each in its own block. The results come back in "
    "<tool_response> blocks. If no tool is needed, answer normally.\n\n"
    "The tools:\n{listing}"
)
_SENTENCE = re.compile(r"(?<=[.!?])\s")


def _describe(tool: Mapping[str, Any], tier: str) -> str:
    fn = tool["function"]
    name = fn["name"]
    params = fn.get("parameters") or {}
    if tier == "names":
        return f"- {name}{signature(params)}"
    description = str(fn.get("description") or "").strip()
    if tier == "first-sentence":
        description = _SENTENCE.split(description, maxsplit=1)[0] if description else ""
        return f"- {name}{signature(params)}: {description}".rstrip(": ")
    schema = json.dumps(params, ensure_ascii=False)
    return f"- {name}: {description}\n  arguments (JSON schema): {schema}"


def tools_in_words(
    tools: Sequence[Mapping[str, Any]],
    context_tokens: int,
    count: Callable[[str], int] = lambda text: len(text) // 4 + 1,
) -> tuple[str | None, str]:
    """The system-prompt text that gives the tools, and the tier used (``none`` if even the
    shortest list does not fit; the text is then None)."""
    normal = normalize_tools(tools)
    for share, tier in TIERS:
        text = _INSTRUCTIONS.format(listing="\n".join(_describe(t, tier) for t in normal))
        if count(text) <= share * context_tokens:
            return text, tier
    return None, "none"


def _escape(text: str) -> str:
    """A tool's text cannot close its block, nor open a call."""
    return re.sub(r"<(/?)(tool_response|tool_call)>", r"<\1\2 >", text)


def transcript_in_words(
    messages: Sequence[Mapping[str, Any]], system_text: str | None
) -> list[dict[str, Any]]:
    """The conversation as a model without tool calling reads it (a new list)."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []

    def flush() -> None:
        if pending:
            out.append({"role": "user", "content": "\n".join(pending)})
            pending.clear()

    for message in messages:
        role = message.get("role")
        if role == "tool":
            pending.append(
                f"<tool_response>\n{_escape(str(message.get('content') or ''))}\n</tool_response>"
            )
            continue
        flush()
        if role == "assistant" and message.get("tool_calls"):
            blocks = []
            for call in message["tool_calls"]:
                fn = call.get("function", call)
                args = fn.get("arguments", {})
                if isinstance(args, str):
                    with contextlib.suppress(ValueError):
                        args = json.loads(args)
                body = json.dumps(
                    {"name": fn.get("name", ""), "arguments": args}, ensure_ascii=False
                )
                blocks.append(f"<tool_call>\n{body}\n</tool_call>")
            text = str(message.get("content") or "")
            out.append(
                {"role": "assistant", "content": (text + "\n" if text else "") + "\n".join(blocks)}
            )
        else:
            out.append({k: v for k, v in message.items() if k != "tool_calls"})
    flush()
    if system_text:
        if out and out[0].get("role") == "system":
            out[0] = {**out[0], "content": f"{out[0].get('content') or ''}\n\n{system_text}"}
        else:
            out.insert(0, {"role": "system", "content": system_text})
    return out
