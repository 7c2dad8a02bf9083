"""Sample calls: what each family declares to show its grammar (``Family.samples``).

A sample writer takes a tool's name, its arguments and the call's number in the reply, and
returns the text that family's models write for that call. The cross-family matrix
(tests/test_families_matrix.py), the streaming and fuzz tests and the stream benchmark
(benchmarks/stream_parsers.py) read every family's samples from the registry, so a family
added there is checked and measured with no other file changed.

The sample tool and its arguments are the ones those share: a file written with a long
string (quotes, a tab, non-ASCII), a path and a number.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["SAMPLE_TOOLS", "Sample", "as_text", "sample_arguments", "sample_content"]

#: Writes one call: ``(name, arguments, index) -> text``.
Sample = Callable[[str, Mapping[str, Any], int], str]

#: The tool the samples call.
SAMPLE_TOOLS: list[dict[str, Any]] = [
    {
        "name": "write_file",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "content": {"type": "string"},
                "mode": {"type": "integer"},
            },
        },
    }
]

_LINE = 'for i in range(10):  # a "quoted" word, a tab\there, and some unicode: héllo → ok\n'


def sample_content(index: int) -> str:
    """The ``content`` argument of sample call ``index``: a few lines of code, its length
    varying with the index."""
    return _LINE * (3 + (index * 7) % 20)


def sample_arguments(index: int) -> dict[str, Any]:
    """The arguments of sample call ``index`` to ``write_file``."""
    return {"path": f"src/file_{index}.py", "content": sample_content(index), "mode": 420}


def as_text(value: object) -> str:
    """A value as the XML-like grammars write it: strings verbatim, others as JSON."""
    return value if isinstance(value, str) else json.dumps(value)
