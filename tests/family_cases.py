"""The replies each family's own tests read, found by convention for the tests that check
every family at once (the cross-family matrix, the streaming test).

A family's test module ``tests/test_families_*.py`` that lists ``MY_VALID`` (family → its
replies with calls, each ``(reply, expected text, calls)``) and ``MY_REPLIES`` (``(family,
reply)`` pairs: valid replies, near misses, plain text) is found by those names, so a family
added with its module, its registry line and its own test module is checked with no other
file changed. (Older modules, whose lists have other shapes, are named where they are read.)
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

from toolwire import get_family
from toolwire.formats.reasoning import known_tags

__all__ = ["modules_listing", "text_kept"]

_HERE = Path(__file__).parent


def modules_listing(name: str) -> list[ModuleType]:
    """Every family test module that defines ``name`` at its top level, by file name."""
    defines = re.compile(rf"^{re.escape(name)}\b", re.M)
    return [
        importlib.import_module(f"{__package__}.{path.stem}")
        for path in sorted(_HERE.glob("test_families_*.py"))
        if defines.search(path.read_text(encoding="utf-8"))
    ]


def text_kept(family: str, reply: str) -> str:
    """The content a reply with no call reads to: all of it, but the markup every family's
    reader drops (a thinking block's closer the reply opens with; the family's end-of-turn
    token at its very end, where an engine left it)."""
    body = reply.lstrip()
    closer = next((c for c in known_tags().closers if body.startswith(c)), None)
    if closer is not None:
        reply = body[len(closer) :].lstrip()
    stream_class = get_family(family).stream_class
    stripped = reply.rstrip(" \t\r\n")
    for end in getattr(stream_class, "turn_ends", ()):
        if stripped.endswith(end):
            return stripped[: -len(end)]
    return reply
