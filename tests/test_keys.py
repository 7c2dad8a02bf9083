"""The gateway's named API keys (:mod:`toolwire.server.keys`): where they come from, how a
bad line is told (by its number, never its key), and ``toolwire serve`` refusing a bad
file and starting with a good one, in its own process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest

import toolwire
from toolwire.errors import UsageError
from toolwire.server.keys import Keys
from toolwire.testing import FakeOpenAIServer, text_deltas

from .serving import wait_healthy

#: Both forms, a comment, a blank line, and spaces around a line and its colon.
GOOD = (
    "# the gateway's keys\n"
    "alice sk-alice-secret-1\n"
    "\n"
    "bob:sk-bob-secret-22\n"
    "   carol :  sk-carol-secret-333   \n"
)


def _owners(keys: Keys, *sent: str) -> list[str | None]:
    return [keys.owner(f"Bearer {key}") for key in sent]


def test_a_keys_file_of_both_forms_with_comments_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(GOOD)
    keys = Keys.read(path)
    assert keys.names() == ["alice", "bob", "carol"]
    sent = ("sk-alice-secret-1", "sk-bob-secret-22", "sk-carol-secret-333", "sk-nobody")
    assert _owners(keys, *sent) == ["alice", "bob", "carol", None]
    assert keys.owner(x_api_key="sk-bob-secret-22") == "bob"


def test_the_environment_gives_a_file_its_lines_or_one_key(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(GOOD)
    by_path = Keys.given(environ={"TOOLWIRE_API_KEYS": str(path)})
    by_lines = Keys.given(environ={"TOOLWIRE_API_KEYS": GOOD})
    assert by_path == by_lines and by_path.names() == ["alice", "bob", "carol"]
    one = Keys.given(environ={"TOOLWIRE_API_KEY": "sk-only-one"})
    assert one.names() == ["default"] and one.owner("Bearer sk-only-one") == "default"
    both = Keys.given(environ={"TOOLWIRE_API_KEY": "sk-only-one", "TOOLWIRE_API_KEYS": GOOD})
    assert both.names() == ["default", "alice", "bob", "carol"]
    assert not Keys.given(environ={})


def test_one_line_of_a_long_key_in_the_environment_is_read_as_a_line() -> None:
    """A single line is tried as a path first: one longer than a file name may be is a
    line, not an OSError (whose message would show the key)."""
    key = "sk-" + "k" * 400
    keys = Keys.given(environ={"TOOLWIRE_API_KEYS": f"alice {key}"})
    assert keys.owner(f"Bearer {key}") == "alice"


def test_one_line_beginning_with_a_tilde_is_a_bad_line_not_a_crash() -> None:
    with pytest.raises(UsageError, match="line 1: a line is 'name key'") as raised:
        Keys.given(environ={"TOOLWIRE_API_KEYS": f"~nosuchuser-here {SECRET}"})
    assert SECRET not in str(raised.value)


def test_the_api_key_flag_is_the_default_key_and_the_environment_is_then_unread(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keys"
    path.write_text(GOOD)
    env = {"TOOLWIRE_API_KEYS": "zed sk-zed-secret"}
    keys = Keys.given("sk-flag-key", str(path), env)
    assert keys.names() == ["default", "alice", "bob", "carol"]
    assert keys.owner("Bearer sk-zed-secret") is None
    assert Keys.given("sk-flag-key", None, env).names() == ["default"]


SECRET = "sk-very-secret-key-9"


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        (f"alice sk-a-1\n{SECRET}\n", 2, "one word"),
        (f"alice sk-a-1\n\n# c\nalice {SECRET}\n", 4, "given twice (line 1)"),
        (f"alice {SECRET}\nbob {SECRET}\n", 2, "this key is given twice (line 1)"),
        (f"alice sk-a-1\nbob {SECRET} trailing\n", 2, "visible ASCII"),
        (f"al/ice {SECRET}\n", 1, "the name of letters"),
    ],
    ids=["one-field", "name-twice", "key-twice", "spaces-in-key", "bad-name"],
)
def test_a_bad_line_is_named_by_number_never_by_its_key(
    tmp_path: Path, text: str, line: int, says: str
) -> None:
    path = tmp_path / "keys"
    path.write_text(text)
    for read in (lambda: Keys.read(path), lambda: Keys.given(environ={"TOOLWIRE_API_KEYS": text})):
        with pytest.raises(UsageError) as raised:
            read()
        message = str(raised.value)
        assert f"line {line}:" in message and says in message
        assert SECRET not in message and "very-secret" not in message


def test_a_file_of_no_keys_and_a_missing_file_are_usage_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("# nothing here\n\n")
    with pytest.raises(UsageError, match="holds no key"):
        Keys.read(empty)
    with pytest.raises(UsageError, match="cannot be read"):
        Keys.read(tmp_path / "missing")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(home: Path) -> dict[str, str]:
    """This toolwire, its data in ``home``, and no key but the test's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_API_KEY")}
    return {
        **env,
        "PYTHONPATH": str(Path(toolwire.__file__).parents[1]),
        "TOOLWIRE_HOME": str(home),
    }


def test_serve_refuses_a_bad_keys_file_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"alice sk-a-secret-1\nbob sk-b-secret-2\nalice {SECRET}\n")
    command = [sys.executable, "-m", "toolwire", "serve", "--upstream", "http://127.0.0.1:9/v1"]
    done = subprocess.run(
        [*command, "--upstream-model", "m", "--port", str(_free_port()), "--api-keys", str(path)],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("toolwire: error: --api-keys ")
    assert "line 3: the name 'alice' is given twice (line 1)" in done.stderr
    assert "Traceback" not in done.stderr and SECRET not in done.stderr + done.stdout
    assert "sk-a-secret-1" not in done.stderr


def test_serve_starts_with_a_good_keys_file_off_loopback(tmp_path: Path) -> None:
    """Off loopback a key is required; a good file is one: /health answers to anyone,
    a keyed route only to a key of the file."""
    path = tmp_path / "keys"
    path.write_text(GOOD)
    port = _free_port()
    with FakeOpenAIServer() as upstream:
        command = [sys.executable, "-m", "toolwire", "serve", "--upstream", upstream.base_url]
        flags = ["--api-keys", str(path), "--host", "0.0.0.0", "--store", str(tmp_path / "gw.db")]
        log = tmp_path / "serve.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                [*command, "--upstream-model", "m", "--port", str(port), *flags],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=_env(tmp_path),
            )
        try:
            root = f"http://127.0.0.1:{port}"
            wait_healthy(proc, root, log)
            assert httpx.get(root + "/v1/models").status_code == 401
            bad = httpx.get(root + "/v1/models", headers={"authorization": "Bearer sk-nobody"})
            assert bad.status_code == 401
            models = httpx.get(root + "/v1/models", headers={"x-api-key": "sk-bob-secret-22"})
            assert models.status_code == 200
            alice = openai.OpenAI(base_url=root + "/v1", api_key="sk-alice-secret-1", max_retries=0)
            carol = openai.OpenAI(
                base_url=root + "/v1", api_key="sk-carol-secret-333", max_retries=0
            )
            upstream.add_stream(text_deltas("For Alice."))
            first = alice.responses.create(model="m", input="Hi")
            assert alice.responses.retrieve(first.id).output_text == "For Alice."
            with pytest.raises(openai.NotFoundError):
                carol.responses.retrieve(first.id)
        finally:
            proc.terminate()
            proc.wait(20)
        assert "sk-" not in log.read_text()


def test_serve_off_loopback_without_a_key_is_refused(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "toolwire", "serve", "--upstream", "http://127.0.0.1:9/v1"]
    done = subprocess.run(
        [*command, "--upstream-model", "m", "--host", "0.0.0.0", "--port", str(_free_port())],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=60,
    )
    assert done.returncode == 2 and "needs a key" in done.stderr
