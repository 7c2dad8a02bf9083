"""A package's public names imported on first use (PEP 562), in one place.

A package whose names live in modules that load heavy dependencies (Jinja, jsonschema)
declares where each name lives, and its module ``__getattr__`` imports that module when the
name is first read, then keeps the name: a command that needs one light module of the
package does not load the rest.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: each name of ``homes`` imported from its module
    (relative to the package) when first read, and kept in the package."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
