"""Which response store ``serve --store`` names: the one place that knows every kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import StoreError, UsageError
from .db import home
from .responses import GATEWAY_FILE, StoreLimits
from .responses_sqlite import SqliteResponseStore

__all__ = ["open_response_store"]


def open_response_store(where: str | Path | None = None, limits: StoreLimits | None = None) -> Any:
    """The store at ``where``: a ``postgresql://`` (or ``postgres://``) URL, a
    ``sqlite:///PATH`` URL or a path; by default the gateway's own file in
    :func:`toolwire.store.home`."""
    limits = limits or StoreLimits()
    text = str(where) if where is not None else ""
    if text.startswith(("postgresql://", "postgres://")):
        raise UsageError(
            "--store postgresql://… is not available in this version: give a path (or none, "
            "for the gateway's own file)"
        )
    if not text:
        return SqliteResponseStore(home() / GATEWAY_FILE, limits)
    if "://" in text and not text.startswith("sqlite:///"):
        scheme = text.split("://", 1)[0]
        raise StoreError(
            f"--store takes a path, sqlite:///PATH or postgresql://…, not a {scheme}:// URL",
            kind="corrupt",
        )
    return SqliteResponseStore(Path(text.removeprefix("sqlite:///")).expanduser(), limits)
