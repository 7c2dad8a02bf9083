"""Attributes a model writes in a tag beside the one its syntax puts a name in.

A syntax that writes a name as an XML attribute (``<invoke name="NAME">``, ``<parameter
name="K">``) teaches a model XML, and models echo the tool's description there
(``<invoke name="f" description="…">``, ``<parameter name="k" type="string">``). Those say
nothing the name and the schema do not: unless strict, the engine reads past them, up to the
tag's ``>``, and names it (``recovered-attributes-ignored``). Anything that is not
``key="value"`` pairs breaks the call. The run is bounded, so a tag that never closes costs
at most :data:`MAX_ATTRS` characters.
"""

from __future__ import annotations

import re

__all__ = ["MAX_ATTRS", "Attributes", "closes_attribute"]

#: ``key="value"`` pairs, white space before each, up to the tag's ``>``.
_PAIRS = re.compile(r'(?:\s+[A-Za-z_][\w:.-]*="[^"]*")*\s*')
#: The longest run of other attributes read.
MAX_ATTRS = 512


def closes_attribute(word: str) -> bool:
    """Whether ``word`` ends a name written as an attribute's value: a quote, then the
    tag's end (``">``)."""
    return len(word) >= 2 and word[0] == '"' and word[-1] == ">" and not word[1:-1].strip()


class Attributes:
    """Other attributes after a name's closing quote, read up to the tag's ``>``."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.quoted = False

    def feed(self, s: str, i: int) -> tuple[int, str | None]:
        """Read from ``s[i]``: ``(where it got to, None)`` while the tag is open;
        ``(just past its >, "")`` once read; ``(i, why)`` when it is no attributes."""
        j = i
        n = min(len(s), i + MAX_ATTRS + 1 - self.size)
        while j < n and (self.quoted or s[j] != ">"):
            self.quoted ^= s[j] == '"'
            j += 1
        self.parts.append(s[i:j])
        self.size += j - i
        if self.size > MAX_ATTRS:
            return i, "a tag's attributes are too long"
        if j == len(s):
            return j, None
        if not _PAIRS.fullmatch("".join(self.parts)):
            return j, "malformed attributes in a tag"
        return j + 1, ""

    def text(self) -> str:
        return "".join(self.parts).strip()
