"""The PostgreSQL server the tests of the shared response store use: the one
``$TOOLWIRE_TEST_POSTGRES`` names (scripts/test starts one, by scripts/postgres.sh).

Without it the tests that need it skip, saying why; under CI (``$CI`` set) they fail, so a
CI run cannot pass with the PostgreSQL store untested. Each test gets a schema of its own
(named in the URL, as libpq takes it), dropped afterwards, so runs do not collide.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import pytest

ENV = "TOOLWIRE_TEST_POSTGRES"


def server_url() -> str:
    """The test server's URL, or the test skips (fails under CI)."""
    url = os.environ.get(ENV, "")
    why = ""
    if not url:
        why = f"${ENV} names no PostgreSQL server (scripts/test starts one: scripts/postgres.sh)"
    else:
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError:
            why = "psycopg is not installed: pip install -e '.[postgres]'"
    if why:
        if os.environ.get("CI"):
            pytest.fail(why + "; under CI the PostgreSQL store must be tested")
        pytest.skip(why)
    return url


def with_schema(url: str, schema: str) -> str:
    """``url`` with ``schema`` first on the search path."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote('-csearch_path=' + schema)}"


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A URL whose tables are made in a new, empty schema, dropped afterwards."""
    import psycopg

    url = server_url()
    schema = "test_" + secrets.token_hex(6)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_schema(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
