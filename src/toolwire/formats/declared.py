"""The families declared as syntax values (:mod:`.syntax`), moved here one at a time.

Each declaration runs beside its family's hand-written reader over every corpus
(``tests/test_declared.py``: the peers' parser cases, the family's own sample calls, every
split point of a streamed reply) until the two agree event for event, notices included; then
it replaces the hand-written family in the registry (all five here have). Until then the registry
keeps the hand-written reader, and the declaration is read by the tests only.
"""

from __future__ import annotations

from .derived import DerivedShape
from .reasoning import THINK
from .syntax import Syntax

__all__ = ["DECLARED", "FIREFUNCTION", "GLM", "GRANITE", "HERMES", "NEMOTRON_V2"]

#: Hermes: ``<tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>``, each call in
#: its own tags (Qwen2.5, Qwen3, Hermes 2/3, Granite 4 and many fine-tunes of them).
HERMES = Syntax(
    name="hermes",
    label="Hermes <tool_call> JSON (Qwen2.5, Qwen3, Hermes 2/3, Granite 4)",
    shape=DerivedShape(
        kind="json",
        opening=("<tool_call>",),
        post=("</tool_call>",),
        next_call=("<tool_call>",),
    ),
    reasoning=THINK,
    end_tokens=("<|im_end|>", "<|endoftext|>"),
)

#: Granite 3.x: ``<|tool_call|>[{"name": NAME, "arguments": {...}}, ...]``.
GRANITE = Syntax(
    name="granite",
    label="Granite <|tool_call|>[...] (Granite 3.x)",
    shape=DerivedShape(kind="json", opening=("<|tool_call|>", "["), next_call=(",",), trail=("]",)),
    end_tokens=("<|end_of_text|>",),
    # its template writes no call, but states the format in the prompt with the marker
    prompt_markers=("<|tool_call|>",),
)

#: Nemotron Nano v2: ``<TOOLCALL>[{"name": NAME, "arguments": {...}}, ...]</TOOLCALL>``.
NEMOTRON_V2 = Syntax(
    name="nemotron-v2",
    label="Nemotron <TOOLCALL>[...]</TOOLCALL> (Nemotron Nano v2)",
    shape=DerivedShape(
        kind="json", opening=("<TOOLCALL>", "["), next_call=(",",), trail=("]", "</TOOLCALL>")
    ),
    end_tokens=("<SPECIAL_12>",),
)

#: Firefunction v2: ``functools[{"name": NAME, "arguments": {...}}, ...]`` (the marker holds
#: the ``[``: the word "functools" alone in a reply is no call's start).
FIREFUNCTION = Syntax(
    name="firefunction",
    label="Firefunction functools[...] (Firefunction v2)",
    shape=DerivedShape(kind="json", opening=("functools[",), next_call=(",",), trail=("]",)),
)

#: GLM: ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>``, written
#: by GLM 4.5/4.6/4.7 (a newline after the name and between the tags) and poolside Laguna (the
#: same tags, with or without the newlines). Each value is the text between its tags: the
#: templates write strings as they are and other values as their JSON (the argument pipeline
#: types each by the tool's schema). What GLM models write besides (a value as a JSON string
#: or as JSON with its quotes escaped, a key with no value, newlines between the tags written
#: as ``\\n``) the engine reads for every tagged syntax, each repair named.
GLM = Syntax(
    name="glm",
    label="GLM <tool_call>NAME<arg_key>…<arg_value>… (GLM 4.5/4.6/4.7, poolside Laguna)",
    shape=DerivedShape(
        kind="tags",
        opening=("<tool_call>",),
        key_open=("<arg_key>",),
        key_mid=("</arg_key>", "<arg_value>"),
        value_end=("</arg_value>",),
        post=("</tool_call>",),
        next_call=("<tool_call>",),
    ),
    reasoning=THINK,
    end_tokens=("</assistant>",),  # poolside Laguna
)

#: Every declared family, by name.
DECLARED: dict[str, Syntax] = {s.name: s for s in (HERMES, GRANITE, NEMOTRON_V2, FIREFUNCTION, GLM)}
