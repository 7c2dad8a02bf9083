"""What the response store cannot do reaches clients in words that name nothing of the host:
no response body, header or notice holds the store's file, ``TOOLWIRE_HOME`` or any other
path of the machine, in any of the three APIs, whole or streamed. The operator's log keeps
the cause.

The store is made unusable as it is on real machines: a directory where its file should be,
a file that is not SQLite, a home that is a file, a home that cannot be written. The gateway
is served over real HTTP on 127.0.0.1, in front of a backend that answers "ok".
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolwire.server import create_app
from toolwire.store.opening import open_response_store
from toolwire.store.responses import GATEWAY_FILE
from toolwire.testing import ServedApp

from .gateway_requests import Recorder


def directory(home: Path) -> None:
    (home / GATEWAY_FILE).mkdir(parents=True)


def not_sqlite(home: Path) -> None:
    home.mkdir(parents=True)
    (home / GATEWAY_FILE).write_bytes(b"this is not a database, it is a note\n" * 10)


def home_a_file(home: Path) -> None:
    home.parent.mkdir(parents=True, exist_ok=True)
    home.write_text("a file where the home should be")


def read_only(home: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into a read-only directory")
    home.mkdir(parents=True)
    home.chmod(stat.S_IRUSR | stat.S_IXUSR)


BREAKS = pytest.mark.parametrize(
    "broken",
    [directory, not_sqlite, home_a_file, read_only],
    ids=["a-directory", "not-sqlite", "home-a-file", "read-only"],
)

#: One request of each API, and the Responses request that must read the store.
REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    (
        "/v1/messages",
        {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]},
    ),
    ("/v1/responses", {"model": "m", "input": "hi"}),
    ("/v1/responses", {"model": "m", "input": "hi", "previous_response_id": "resp_abc"}),
]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    where = tmp_path / "toolwire-home"
    monkeypatch.setenv("TOOLWIRE_HOME", str(where))
    yield where
    if where.is_dir():
        where.chmod(stat.S_IRWXU)


def host_paths(home: Path) -> list[str]:
    """What no client may read: the home, the store's file, the machine's own folders."""
    return [str(home), str(home.parent), GATEWAY_FILE, str(Path.home()), "/tmp/", "/root"]


def leaks(text: str, home: Path) -> list[str]:
    return [p for p in host_paths(home) if p in text]


@BREAKS
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_no_answer_names_a_path_of_the_host(
    broken: Any, stream: bool, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken(home)
    store = open_response_store()
    seen: list[str] = []
    with ServedApp(create_app(Recorder(), store=store)) as gateway:
        for path, body in REQUESTS:
            sent = {**body, "stream": True} if stream else body
            r = httpx.post(gateway.url + path, json=sent, timeout=30)
            text = r.text + json.dumps(dict(r.headers))
            assert r.status_code < 500 or r.status_code == 503, (path, r.status_code, r.text)
            assert leaks(text, home) == [], (path, text[:2000])
            seen.append(f"{path} {r.status_code}: {r.text}")
        assert httpx.get(gateway.url + "/health", timeout=10).status_code == 200
    responses = [s for s in seen if s.startswith("/v1/responses")]
    # the store was used and could not be: a notice says the reply was not kept ...
    assert "response-not-stored" in responses[0], responses[0]
    # ... and a continuation, which must read it, is a 503 in plain words
    assert " 503: " in responses[1] and "response store is unavailable" in responses[1]
    # the operator's log has the cause
    assert any("response store" in r.getMessage() for r in caplog.records)
