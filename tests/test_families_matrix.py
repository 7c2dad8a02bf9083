"""The cross-family matrix over every registered family: each reads its own call, and no
family reads a call out of another family's reply.

The calls come from the stream benchmark's generator, which writes one call in each
family's grammar, so a family added there is checked here too.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from toolwire import family_names, get_family


def _benchmark() -> ModuleType:
    path = Path(__file__).parent.parent / "benchmarks" / "stream_parsers.py"
    spec = importlib.util.spec_from_file_location("stream_parsers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CALL = _benchmark()._call
NAMES = family_names()


def test_every_family_has_a_sample_call() -> None:
    assert len(NAMES) >= 16
    for name in NAMES:
        assert CALL(name, 1)


@pytest.mark.parametrize("writer", NAMES)
def test_a_call_is_read_by_its_own_family_only(writer: str) -> None:
    text = CALL(writer, 1)
    assert [c.name for c in get_family(writer).parse(text).calls] == ["write_file"]
    for reader in NAMES:
        if reader != writer:
            assert get_family(reader).parse(text).calls == [], reader
