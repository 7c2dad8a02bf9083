"""The building blocks of a call's GBNF: literals, white space, and the rules one grammar
collects (llama.cpp's schema converter for JSON values, raw text up to a closing word, the
types a schema names). :mod:`.grammar` arranges them into the forms families write.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "SPACE",
    "Rules",
    "cat",
    "lit",
    "properties_of",
    "schema_type",
    "sequence_of",
    "unlit",
    "words",
]

#: White space between JSON tokens and around tags, as templates write it (spaces, a line
#: break and its indent, or both): bounded, so it cannot run on.
SPACE = '| [ \\t]{1,20} ("\\n"{1,2} [ \\t]{0,20})? | "\\n"{1,2} [ \\t]{0,20}'
#: A character of a JSON string, as JSON has it.
_JSON_CHAR = (
    '[^"\\\\\\x00-\\x1F\\x7F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] '
    "[0-9a-fA-F] [0-9a-fA-F])"
)


def lit(text: str) -> str:
    """A GBNF string literal."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def words(texts: Sequence[str]) -> str:
    """Texts one after another, white space allowed between them."""
    return " space ".join(lit(t) for t in texts if t) or '""'


def unlit(fragment: str) -> str:
    """The text of a GBNF fragment that is one literal (else "")."""
    if re.fullmatch(r'"(?:[^"\\]|\\.)*"', fragment):
        try:
            return str(json.loads(fragment))
        except ValueError:
            return ""
    return ""


def cat(*parts: str) -> str:
    """GBNF fragments one after another, white space allowed between them; an empty
    fragment (``""``) is left out, and a leading ``""`` stands for white space before."""
    kept = [p for p in parts if p and p != '""']
    lead = "space " if parts and parts[0] == "" else ""
    return lead + (" space ".join(kept) or '""')


def _class_char(ch: str) -> str:
    if ch in "\\]-^[":
        return f"\\x{ord(ch):02X}"  # the escape both llama.cpp and llguidance read
    return lit(ch)[1:-1]


class Rules:
    """The rules of one grammar being built: llama.cpp's schema converter for JSON values,
    and the rules the forms add (raw text, Python and Gemma values)."""

    def __init__(self) -> None:
        from llama_cpp.llama_grammar import SchemaConverter

        self.conv: Any = SchemaConverter(  # type: ignore[no-untyped-call]
            prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False
        )
        self._until: dict[str, str] = {}
        #: The texts of the form being built (its tags and markers): never a value's text.
        self.markup: tuple[str, ...] = ()

    def add(self, name: str, rule: str) -> str:
        """Add a rule (renamed if the name is taken by another); its name."""
        return str(self.conv._add_rule(name, rule))  # the converter's own way to add a rule

    def arguments(self, params: Mapping[str, Any], name: str) -> str:
        """The rule for a tool's arguments object: its schema, converted; any JSON object when
        the converter cannot take it. No key beyond the declared ones, unless it says so."""
        schema: dict[str, Any] = dict(params) if params else {"type": "object"}
        if schema.get("type", "object") == "object" and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
        return self.value(schema, name, fallback={"type": "object"})

    def value(self, schema: Mapping[str, Any], name: str, *, fallback: Any = None) -> str:
        """The rule for one JSON value of ``schema``; any JSON value when it cannot be had."""
        try:
            resolved = self.conv.resolve_refs(dict(schema), "")
            return str(self.conv.visit(resolved, name))
        except Exception:
            return str(self.conv.visit(fallback or {}, name + "-any"))

    def through(self, closer: str) -> str:
        """Raw text up to and with the first ``closer`` (the text that ends it)."""
        return self.value_text(closer, (), trim=False)

    def trimmed(self, closer: str, markup: Sequence[str] = ()) -> str:
        """Like :meth:`through`, with no white space at the value's ends but one line break
        each side (as Qwen's template writes ``<parameter=K>\\nV\\n</parameter>``: under a
        grammar a model would indent a value, and the indent would be its text), and none of
        ``markup`` inside (the form's own tags: a value holding them would be read as them)."""
        return self.value_text(closer, tuple(markup), trim=True)

    def value_text(self, closer: str, markup: tuple[str, ...], *, trim: bool) -> str:
        """The matcher of a raw value and its ``closer``, a character at a time (so that no
        engine's lexer takes a character of the value for the start of the closer), as
        rules: each state is the text matched so far of the closer or of a ``markup`` text,
        and what comes before it (``S`` the start, ``F`` after a first line break, ``N``
        after text, ``L`` after text and a line break, ``W`` after other white space, where
        the closer may not come when ``trim``)."""
        key = f"{trim}:{closer}:" + "\x00".join(markup)
        if key in self._until:
            return self._until[key]
        base = f"raw{len(self._until)}"
        # a tag of the form's is refused however it ends (``</tool_call >``); the closer's
        # own name, once written, ends only as the closer (``</parameter name>`` is no value)
        stems = [m[:-1] for m in markup if m.endswith(">") and len(m) > 2]
        forbidden = [m for m in (*markup, *stems) if m and not closer.startswith(m)]
        patterns = (closer, *dict.fromkeys(forbidden))
        stem = closer[:-1] if trim and closer.endswith(">") and len(closer) > 2 else ""
        blanks = " \t\n\r"
        alphabet = sorted(set("".join(patterns)) | set(blanks))
        prefixes = {p[:k] for p in patterns for k in range(len(p))} | {stem}

        def plain(cls: str | None, ch: str) -> str | None:
            if cls is None:
                return None
            if ch not in blanks:
                return "N"
            if not trim:
                return "W"
            if cls == "S":
                return "F" if ch == "\n" else None
            if cls == "F":
                return None
            # line breaks after text: a value may end with its own (a file's last line)
            return "L" if cls in ("N", "L") and ch == "\n" else "W"

        def move(state: tuple[str, str], ch: str) -> tuple[str, str] | str | None:
            cls, seen = state
            if stem and seen.endswith(stem) and ch != closer[-1]:
                return None
            text = seen + ch
            if any(text.endswith(m) for m in patterns[1:]):
                return None
            if text.endswith(closer):
                start = len(text) - len(closer)
                for c in text[:start]:
                    cls = plain(cls, c)  # type: ignore[assignment]
                return "end" if cls is not None and (cls != "W" or not trim) else None
            keep = next(k for k in range(len(text), -1, -1) if text[len(text) - k :] in prefixes)
            after: str | None = cls
            for c in text[: len(text) - keep]:
                after = plain(after, c)
            return None if after is None else (after, text[len(text) - keep :])

        # Each state's rule is the text that leads to it (a left-linear grammar): an Earley
        # parser (llguidance's) holds a fixed number of items per character of such a rule,
        # where the right-linear one (each state followed by the rest) held one more item per
        # character read and was refused past 2,000 characters of one value.
        end = f"{base}-end"
        names: dict[tuple[str, str], str] = {}
        todo = [("S", "")]
        names[todo[0]] = f"{base}-0"
        incoming: dict[str, list[str]] = {names[todo[0]]: ['""'], end: []}
        while todo:
            state = todo.pop()
            # the characters that lead to one state, as one class
            groups: dict[str, list[str]] = {}
            for ch in [*alphabet, "\x00"]:
                to = move(state, ch)
                if to is None:
                    continue
                target = end
                if isinstance(to, tuple):
                    if to not in names:
                        names[to] = f"{base}-{len(names)}"
                        incoming[names[to]] = []
                        todo.append(to)
                    target = names[to]
                groups.setdefault(target, []).append(ch)
            for target, chars in groups.items():
                if "\x00" in chars:
                    left = [c for c in alphabet if c not in chars]
                    piece = "[^" + "".join(_class_char(c) for c in left) + "]"
                else:
                    piece = "[" + "".join(_class_char(c) for c in chars) + "]"
                incoming[target].append(f"{names[state]} {piece}")
        for rule_name, alts in incoming.items():
            self.add(rule_name, " | ".join(alts) or '"\\x00"')
        self._until[key] = end
        return end

    def rules(self) -> dict[str, str]:
        out: dict[str, str] = dict(self.conv._rules)
        # white space as models write JSON: none, a space, or a new line and its indent
        out["space"] = SPACE
        if "char" in out:
            # a JSON string holds no raw control character (the converter's port lets them
            # in; a reader would have to tolerate them)
            out["char"] = _JSON_CHAR
        return out


def schema_type(schema: Mapping[str, Any]) -> str:
    """A property's JSON type, ``string`` when it names none it can be told by."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind is None and "enum" in schema:
        values = schema["enum"]
        kind = "string" if values and all(isinstance(v, str) for v in values) else None
    if kind is None and "const" in schema:
        kind = "string" if isinstance(schema["const"], str) else None
    return kind if isinstance(kind, str) else "any"


def properties_of(params: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], bool]]:
    props = params.get("properties")
    required = params.get("required") or ()
    if not isinstance(props, Mapping):
        return []
    return [
        (key, value if isinstance(value, Mapping) else {}, key in required)
        for key, value in props.items()
    ]


def sequence_of(items: Sequence[tuple[str, bool]], sep: str, lead: str = "") -> str:
    """Items in order, each optional or not, ``sep`` (a GBNF fragment, or none) between two
    that are written; white space around each. ``lead`` (a GBNF fragment) comes before each
    item, written once before the choice of the first: an engine that reads literals as
    lexemes (llguidance) would otherwise take the text an item shares with another, where one
    is a lexeme of its own and the other the start of a longer one, for the longer one."""
    before = f"{lead} space " if lead else ""

    def rest(i: int) -> str:
        parts = []
        for item, required in items[i:]:
            piece = f"space {sep} space {before}{item}" if sep else f"space {before}{item}"
            parts.append(piece if required else f"({piece})?")
        return " ".join(parts)

    def first(i: int) -> tuple[str, bool]:
        """The items from ``i`` with none written before, ``lead`` left out; whether it may
        be empty."""
        if i == len(items):
            return "", True
        item, required = items[i]
        head = f"{item} {rest(i + 1)}".strip()
        if required:
            return head, False
        after, empty = first(i + 1)
        if not after:
            return f"({head})", True
        return f"({head}) | {after}", empty

    out, empty = first(0)
    if not out:
        return '""'
    return f"({before}({out}))" + ("?" if empty else "")
