"""Draft 2020-12's meta-schema as one document, so checking a tool's schema is quick.

Every tool a request declares has its schema checked against the meta-schema before any
call is judged by it. jsonschema checks against Draft 2020-12's meta-schema as published: a
root that is the ``allOf`` of seven vocabulary documents, each reached by URI, each of
whose subschemas is reached again through ``$dynamicRef`` — every node of a tool's schema
costs seven cross-document look-ups. Claude Code's twelve tools took 110 ms; a request of a
thousand tools, seconds, all of it work a client chooses.

Here the same rules are one document: the vocabularies' ``properties`` and ``$defs`` side
by side (no two vocabularies name the same keyword or definition), each ``$dynamicRef`` to
the meta-schema a ``$ref`` to the root (the same schema, since toolwire extends no
vocabulary), each reference to another vocabulary's definition a local one. The result
refuses exactly what the published one refuses (``tests/test_work_budget.py`` checks it on
every schema the tests hold), about thirty times faster.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jsonschema_specifications

__all__ = ["flat_metaschema"]

_BASE = "https://json-schema.org/draft/2020-12/"
_ROOT = _BASE + "schema"


def _contents(uri: str) -> Mapping[str, Any]:
    found = jsonschema_specifications.REGISTRY[uri]
    contents: Mapping[str, Any] = getattr(found, "contents", found)
    return contents


#: The keywords whose value maps names (of keywords, of definitions) to subschemas.
_NAMED = frozenset({"properties", "$defs", "patternProperties", "dependentSchemas"})


def _local(node: Any) -> Any:
    """The subschema ``node`` with every reference made local to the one document."""
    if isinstance(node, list):
        return [_local(value) for value in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$dynamicRef":
            out["$ref"] = "#"
        elif key == "$ref" and isinstance(value, str) and "#/$defs/" in value:
            out["$ref"] = "#/$defs/" + value.split("#/$defs/", 1)[1]
        elif key in _NAMED and isinstance(value, Mapping):
            out[key] = {name: _local(sub) for name, sub in value.items()}
        elif key not in ("$dynamicAnchor", "$id", "$schema", "$vocabulary"):
            out[key] = _local(value)
    return out


@lru_cache(maxsize=1)
def flat_metaschema() -> dict[str, Any]:
    """Draft 2020-12's meta-schema, its vocabularies merged into one document."""
    root = _contents(_ROOT)
    merged: dict[str, Any] = {
        "$schema": _ROOT,
        "type": ["object", "boolean"],
        "properties": {},
        "$defs": {},
    }
    parts = [root] + [_contents(_BASE + ref["$ref"]) for ref in root["allOf"]]
    for part in parts:
        for word in ("properties", "$defs"):
            for name, value in part.get(word, {}).items():
                if name in merged[word]:
                    raise RuntimeError(f"two vocabularies define {word} {name!r}")
                merged[word][name] = _local(value)
    return merged
