"""``toolwire families``: every tool-call family, from what each declares (its name, the
models, the texts that open its calls, its thinking tags, whether its calls can be
constrained). ``--markdown`` prints the README's table; ``--update FILE`` rewrites that
table in place, between ``<!-- families:start -->`` and ``<!-- families:end -->``
(tests/test_families_declared.py fails when README.md's differs)."""

from __future__ import annotations

import argparse
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .common import print_json

__all__ = ["END", "START", "add_families", "markdown", "text_table", "update"]

START = "<!-- families:start -->"
END = "<!-- families:end -->"


def add_families(f: argparse.ArgumentParser) -> None:
    out = f.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="the families as JSON")
    out.add_argument("--markdown", action="store_true", help="the README's table")
    out.add_argument(
        "--update", metavar="FILE", help="rewrite the table between the markers in FILE"
    )
    f.set_defaults(run=_cmd_families)


def _cmd_families(args: argparse.Namespace) -> int:
    from ..formats.registry import describe_families

    rows = describe_families()
    if args.json:
        print_json(rows)
    elif args.markdown:
        print(markdown(rows), end="")
    elif args.update:
        path = Path(args.update)
        path.write_text(update(path.read_text(encoding="utf-8"), rows), encoding="utf-8")
    else:
        print(text_table(rows), end="")
    return 0


def _shown(text: str) -> str:
    """A marker as written, its line breaks visible."""
    return text.replace("\n", "\\n")


def _cells(row: Mapping[str, Any]) -> list[str]:
    return [
        row["name"],
        row["models"],
        " ".join(_shown(m) for m in row["markers"]),
        ", ".join(row["thinking"]),
        "yes" if row["constrained"] else "no",
    ]


_HEADS = ["name", "models", "markers", "thinking", "constrained"]


def text_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The families as aligned columns, one line each."""
    table = [_HEADS, *(_cells(r) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(_HEADS) - 1)]
    out = []
    for line in table:
        padded = [c.ljust(w) for c, w in zip(line[:-1], widths, strict=True)]
        out.append("  ".join([*padded, line[-1]]).rstrip() + "\n")
    return "".join(out)


def _code(text: str) -> str:
    """``text`` as inline code in a Markdown table cell (its pipes escaped)."""
    body = _shown(text).replace("|", "\\|")
    fence = "``" if "`" in body else "`"
    pad = " " if body.startswith(("`", " ")) or body.endswith(("`", " ")) else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The families as a Markdown table (the README's)."""
    lines = ["| name | models | markers | thinking | constrained |", "|---|---|---|---|---|"]
    for r in rows:
        cells = [
            f"`{r['name']}`",
            html.escape(r["models"], quote=False).replace("|", "\\|"),
            " ".join(_code(m) for m in r["markers"]),
            ", ".join(_code(t) for t in r["thinking"]),
            "yes" if r["constrained"] else "no",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def update(text: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """``text`` with the table between :data:`START` and :data:`END` generated anew."""
    at, end = text.find(START), text.find(END)
    if at < 0 or end < at:
        raise UsageError(f"no {START} … {END} section to rewrite")
    return text[: at + len(START)] + "\n" + markdown(rows) + text[end:]
