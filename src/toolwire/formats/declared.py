"""The families declared as syntax values (:mod:`.syntax`), moved here one at a time.

Each declaration runs beside its family's hand-written reader over every corpus
(``tests/test_declared.py``: the peers' parser cases, the family's own sample calls, every
split point of a streamed reply) until the two agree event for event, notices included; then
it replaces the hand-written module in the registry. Until then the registry keeps the
hand-written reader and this module is read by the tests and ``benchmarks/declared.py`` only.
"""

from __future__ import annotations

from .derived import DerivedShape
from .reasoning import THINK
from .syntax import Syntax

__all__ = ["DECLARED", "HERMES"]

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

#: Every declared family, by name.
DECLARED: dict[str, Syntax] = {s.name: s for s in (HERMES,)}
