"""The public surface: ``__all__`` is complete, sorted, and every name in it exists."""

from __future__ import annotations

import types

import toolwire


def test_all_is_sorted_and_exists() -> None:
    assert toolwire.__all__ == sorted(toolwire.__all__)
    for name in toolwire.__all__:
        assert hasattr(toolwire, name), name


def test_all_is_complete() -> None:
    public = {
        name
        for name, value in vars(toolwire).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public - {"annotations"} <= set(toolwire.__all__)


def test_errors_share_one_base() -> None:
    for name in toolwire.__all__:
        value = getattr(toolwire, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, toolwire.ToolwireError), name
