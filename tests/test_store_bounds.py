"""A bounded store: a chain of continuations costs what it adds, a conversation past
``history_bytes`` is refused, a response lives ``ttl`` seconds from its last use, and a key
keeps at most its quota (another key unaffected); the ``serve --store-…`` flags set them.
Over real HTTP with the official client."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import toolwire
from toolwire.backends import OpenAIBackend
from toolwire.cli import _parser
from toolwire.cli.serve import store_limits
from toolwire.server import create_app
from toolwire.server.keys import Keys
from toolwire.store.responses import StoreLimits
from toolwire.store.responses_sqlite import SqliteResponseStore
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

from .serving import wait_healthy

#: The size of each turn's input, in bytes.
N = 8000
ALICE, BOB = "sk-alice-key-1", "sk-bob-key-22"


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def _served(
    tmp_path: Path, limits: StoreLimits, clock: Clock | None = None
) -> Iterator[tuple[FakeOpenAIServer, str, SqliteResponseStore]]:
    store = SqliteResponseStore(tmp_path / "gateway.db", limits, clock=clock or Clock())
    keys = Keys.of({"alice": ALICE, "bob": BOB})
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("engine", base_url=upstream.base_url)
        with ServedApp(create_app(backend, model_name="gw", keys=keys, store=store)) as app:
            yield upstream, app.url, store


def _client(url: str, key: str = ALICE) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def _turn(n: int) -> str:
    """An input of exactly N bytes, its own for each turn."""
    head = f"turn {n}: "
    return head + "abcdefghij" * ((N - len(head)) // 10) + "k" * ((N - len(head)) % 10)


def test_a_chain_of_continuations_stores_what_it_adds_and_is_bounded(tmp_path: Path) -> None:
    limits = StoreLimits(history_bytes=int(11.5 * N))
    with _served(tmp_path, limits) as (upstream, url, store):
        client = _client(url)
        previous: str | None = None
        for n in range(12):  # a first response and 11 continuations: 12 stored
            upstream.add_stream(text_deltas(f"ok {n}"))
            asked: dict[str, Any] = {"previous_response_id": previous} if previous else {}
            reply = client.responses.create(model="gw", input=_turn(n), **asked)
            assert reply.output_text == f"ok {n}"
            previous = reply.id
        sent = upstream.requests[-1]["messages"]
        assert len(sent) == 2 * 12 - 1 and sent[-1]["content"] == _turn(11)
        # the history sent upstream for the 12th is within history_bytes
        assert len(json.dumps(sent[:-1])) <= limits.history_bytes

        used = store.usage("alice").bytes
        assert 12 * N <= used < 2 * 12 * N + 4096
        # each response storing its whole history would have kept 1 + 2 + … + 12 = 78 turns
        assert used < 78 * N / 3
        # the file says so too: its rows hold about 12 turns
        with sqlite3.connect(tmp_path / "gateway.db") as db:
            (rows, kept) = db.execute(
                "SELECT count(*), sum(length(body)) FROM responses"
            ).fetchone()
        assert rows == 12 and 12 * N <= kept < 2 * 12 * N

        # the 13th would continue 12 turns: past history_bytes, a 400 before the model
        upstream.add_stream(text_deltas("never"))
        with pytest.raises(openai.BadRequestError) as raised:
            client.responses.create(model="gw", previous_response_id=previous, input=_turn(12))
        assert raised.value.param == "previous_response_id"
        body: Any = raised.value.body
        assert body["param"] == "previous_response_id"
        assert str(limits.history_bytes) in body["message"]
        assert str(tmp_path) not in body["message"]
        assert len(upstream.requests) == 12


def test_an_expired_response_is_not_found_and_continuing_keeps_alive(tmp_path: Path) -> None:
    clock = Clock()
    with _served(tmp_path, StoreLimits(ttl=60), clock) as (upstream, url, _store):
        client = _client(url)
        upstream.add_stream(text_deltas("One."))
        first = client.responses.create(model="gw", input="Hi")
        upstream.add_stream(text_deltas("Lonely."))
        lonely = client.responses.create(model="gw", input="Hello")
        clock.now += 50
        upstream.add_stream(text_deltas("Two."))
        second = client.responses.create(model="gw", previous_response_id=first.id, input="x")
        clock.now += 30  # 80 s after the first two: the lonely one expired, the chain did not
        assert client.responses.retrieve(first.id).output_text == "One."
        assert client.responses.retrieve(second.id).output_text == "Two."
        gone = httpx.get(
            f"{url}/v1/responses/{lonely.id}", headers={"authorization": f"Bearer {ALICE}"}
        )
        never = "resp_" + "0" * 48
        unknown = httpx.get(
            f"{url}/v1/responses/{never}", headers={"authorization": f"Bearer {ALICE}"}
        )
        assert gone.status_code == unknown.status_code == 404
        assert gone.content == unknown.content.replace(never.encode(), lonely.id.encode())
        with pytest.raises(openai.NotFoundError) as raised:
            client.responses.create(model="gw", previous_response_id=lonely.id, input="y")
        assert raised.value.param == "previous_response_id"
        clock.now += 61  # the chain's last use was 91 s ago
        for rid in (first.id, second.id):
            with pytest.raises(openai.NotFoundError):
                client.responses.retrieve(rid)


def test_a_key_past_its_quota_is_refused_and_another_is_not(tmp_path: Path) -> None:
    with _served(tmp_path, StoreLimits(key_responses=2)) as (upstream, url, store):
        alice, bob = _client(url, ALICE), _client(url, BOB)
        for word in ("one", "two"):
            upstream.add_stream(text_deltas(word))
            assert alice.responses.create(model="gw", input=word).output_text == word
        with pytest.raises(openai.BadRequestError) as raised:
            alice.responses.create(model="gw", input="three")
        assert raised.value.param == "store"
        assert "store: false" in raised.value.message
        assert len(upstream.requests) == 2  # refused before the model ran
        # unstored, alice is still served; bob has his own quota
        upstream.add_stream(text_deltas("free"))
        assert alice.responses.create(model="gw", input="x", store=False).output_text == "free"
        upstream.add_stream(text_deltas("bob's"))
        assert bob.responses.create(model="gw", input="hi").output_text == "bob's"
        assert store.usage("alice").responses == 2 and store.usage("bob").responses == 1


def _serve_args(*flags: str) -> Any:
    words = ["serve", "--upstream", "http://127.0.0.1:9/v1", *flags]
    return _parser(words).parse_args(words)


def test_the_store_flags_build_the_limits() -> None:
    assert store_limits(_serve_args()) == StoreLimits()
    limits = store_limits(
        _serve_args(
            "--store-ttl",
            "12h",
            "--store-history-bytes",
            "2M",
            "--store-history-messages",
            "500",
            "--store-key-bytes",
            "1G",
            "--store-key-responses",
            "40",
        )
    )
    assert limits == StoreLimits(
        ttl=12 * 3600.0,
        history_bytes=2 * 1024**2,
        history_messages=500,
        key_bytes=1024**3,
        key_responses=40,
    )
    assert store_limits(_serve_args("--store-ttl", "90")).ttl == 90.0
    assert store_limits(_serve_args("--store-ttl", "30d")).ttl == 30 * 86400.0
    assert store_limits(_serve_args("--store-key-bytes", "4096")).key_bytes == 4096


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--store-ttl", "0"),
        ("--store-ttl", "-5h"),
        ("--store-ttl", "soon"),
        ("--store-ttl", "nan"),
        ("--store-history-bytes", "0"),
        ("--store-history-bytes", "1.5M"),
        ("--store-history-messages", "-1"),
        ("--store-key-bytes", "lots"),
        ("--store-key-responses", "1e3"),
    ],
)
def test_a_bad_store_flag_is_a_usage_error_naming_it(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        _serve_args(f"{flag}={value}")
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}:" in err and "Traceback" not in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_takes_its_store_flags(tmp_path: Path) -> None:
    """``toolwire serve`` in its own process: its flags bound the store it opens."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_API_KEY")}
    env.update(PYTHONPATH=str(Path(toolwire.__file__).parents[1]), TOOLWIRE_HOME=str(tmp_path))
    with FakeOpenAIServer() as upstream:
        command = [sys.executable, "-m", "toolwire", "serve", "--upstream", upstream.base_url]
        flags = ["--store", str(tmp_path / "gw.db"), "--store-key-responses", "1"]
        log = tmp_path / "serve.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                [*command, "--upstream-model", "m", "--port", str(port), *flags],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        try:
            root = f"http://127.0.0.1:{port}"
            wait_healthy(proc, root, log)
            client = openai.OpenAI(base_url=root + "/v1", api_key="x", max_retries=0)
            upstream.add_stream(text_deltas("kept"))
            first = client.responses.create(model="m", input="hi")
            assert client.responses.retrieve(first.id).output_text == "kept"
            with pytest.raises(openai.BadRequestError) as raised:
                client.responses.create(model="m", input="again")
            assert raised.value.param == "store"
        finally:
            proc.terminate()
            proc.wait(20)
