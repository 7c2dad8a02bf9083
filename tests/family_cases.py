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

__all__ = ["modules_listing"]

_HERE = Path(__file__).parent


def modules_listing(name: str) -> list[ModuleType]:
    """Every family test module that defines ``name`` at its top level, by file name."""
    defines = re.compile(rf"^{re.escape(name)}\b", re.M)
    return [
        importlib.import_module(f"{__package__}.{path.stem}")
        for path in sorted(_HERE.glob("test_families_*.py"))
        if defines.search(path.read_text(encoding="utf-8"))
    ]
