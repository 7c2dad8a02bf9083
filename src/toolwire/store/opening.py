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
    """The store at ``where``: a ``postgresql://`` (or ``postgres://``) URL (the
    PostgreSQL store gateways share), a ``sqlite:///PATH`` URL or a path; by default the
    gateway's own file in :func:`toolwire.store.home`."""
    limits = limits or StoreLimits()
    text = str(where) if where is not None else ""
    if text.startswith(("postgresql://", "postgres://")):
        from . import responses_pg  # psycopg is imported only for a PostgreSQL store

        if not responses_pg.available():
            raise UsageError(
                "--store postgresql://… needs psycopg, the postgres extra: "
                "pip install 'toolwire[postgres]'"
            )
        return responses_pg.PostgresResponseStore(text, limits)
    if not text:
        return SqliteResponseStore(home() / GATEWAY_FILE, limits)
    if "://" in text and not text.startswith("sqlite:///"):
        scheme = text.split("://", 1)[0]
        raise StoreError(
            f"--store takes a path, sqlite:///PATH or postgresql://…, not a {scheme}:// URL",
            kind="corrupt",
        )
    return SqliteResponseStore(Path(text.removeprefix("sqlite:///")).expanduser(), limits)
