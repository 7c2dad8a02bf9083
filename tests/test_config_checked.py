"""``toolwire serve --config`` checked whole when it starts, and a model that still cannot
be loaded told to clients as the operator's failure, naming the entry.

The start errors run the real command in a process of its own: exit code 2, one line on
stderr naming the entry and the field, no traceback, and no server started. The load
failure is a GGUF file that passes the header and metadata check but that llama.cpp cannot
load as a model, served behind the real app and asked by the official clients of all
three APIs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import anthropic
import openai
import pytest

from toolwire.cli import _parser
from toolwire.cli.serve import served_models
from toolwire.server import create_app
from toolwire.server.config import (
    MAX_CONFIG_BYTES,
    MAX_NESTING,
    check_files,
    nesting,
    read_config,
)
from toolwire.testing import ServedApp

from .gateway_process import free_port, serve_env
from .test_gguf import write_gguf

UP = "upstream = 'http://127.0.0.1:9/v1'\nupstream_model = 'm'\n"


def _serve(tmp_path: Path, config: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "models.toml"
    path.write_text(config, encoding="utf-8")
    command = [sys.executable, "-m", "toolwire", "serve", "--config", str(path)]
    return subprocess.run(
        [*command, "--port", str(free_port())],
        env=serve_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        (UP + "dialect = 'gemeni'\n", "models[0] (gw).dialect: unknown schema dialect 'gemeni'"),
        (UP + "engine = 'tgi'\n", "models[0] (gw).engine: unknown engine 'tgi'"),
        ("gguf = 'x.gguf'\ntool_format = 'hermez'\n", "models[0].tool_format 'hermez' is not"),
        (UP + "port = 3\n", "models[0] has keys a model entry does not take: port"),
        (UP + "words = 'yes'\n", "models[0].words must be true or false"),
        ("gguf = 'x.gguf'\nctx = '4k'\n", "models[0].ctx must be a whole number"),
        ("gguf = 'NOTES.txt'\n", "models[0] (gw).gguf:"),
        ("gguf = 'missing.gguf'\n", "models[0] (gw).gguf: 'missing.gguf' is neither"),
    ],
)
def test_a_bad_entry_is_a_usage_error_at_start(tmp_path: Path, entry: str, says: str) -> None:
    (tmp_path / "NOTES.txt").write_text("not a model at all\n")
    config = f"[[models]]\nname = 'ok'\n{UP}\n[[models]]\nname = 'gw'\n{entry}"
    # the broken entry is the second: its index names it
    says = says.replace("models[0]", "models[1]")
    done = _serve(tmp_path, config.replace("NOTES.txt", str(tmp_path / "NOTES.txt")))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr  # one line
    assert says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "serving at" not in done.stderr


def test_a_file_that_is_not_gguf_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "fake.gguf").write_bytes(b"PK\x03\x04 a zip, not a model")
    done = _serve(tmp_path, f"[[models]]\nname = 'local'\ngguf = '{tmp_path / 'fake.gguf'}'\n")
    assert done.returncode == 2 and "models[0] (local).gguf:" in done.stderr
    assert "not a GGUF file" in done.stderr and "Traceback" not in done.stderr


def test_a_deeply_nested_config_is_a_usage_error_not_a_recursion_error(tmp_path: Path) -> None:
    deep = "x = " + "[" * 5000 + "]" * 5000 + "\n"
    done = _serve(tmp_path, deep + f"[[models]]\nname = 'a'\n{UP}")
    assert done.returncode == 2, done.stderr
    assert f"nests arrays or inline tables 5000 deep; at most {MAX_NESTING}" in done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr


def test_a_config_too_large_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text("# " + "x" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(ValueError, match=f"larger than {MAX_CONFIG_BYTES} bytes"):
        read_config(path)


def test_nesting_counts_brackets_outside_strings_and_comments() -> None:
    assert nesting("a = [[1], {b = [2]}]\n") == 3
    assert nesting("a = '[[[['\nb = \"[[\\\"[[\"\n# [[[[[[\nc = '''\n[[[\n'''\n") == 0
    assert nesting('a = """x""""\nb = [1]\n') == 1
    assert nesting("[[models]]\nname = 'a'\n") == 2
    assert nesting("a = '[[[") == 0  # an unclosed string: tomllib tells it


def test_a_nesting_within_the_bound_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text(f"[[models]]\nname = 'a'\nname_note = '{'[' * 100}'\n{UP}")
    with pytest.raises(ValueError, match="name_note"):  # read past the depth check
        read_config(path)


@pytest.fixture
def unloadable(tmp_path: Path) -> tuple[str, argparse.Namespace]:
    """The file, and ``serve``'s arguments, of one entry, ``broken``, whose file is a GGUF
    by its header and metadata that llama.cpp cannot load: a tokenizer, one tensor, no model."""
    pytest.importorskip("llama_cpp")
    (tmp_path / "secret-dir").mkdir()
    path = write_gguf(tmp_path / "secret-dir" / "broken.gguf")
    config = tmp_path / "models.toml"
    config.write_text(f"[[models]]\nname = 'broken'\ngguf = '{path}'\n")
    check_files(read_config(config))  # it passes the check at start
    args = _parser().parse_args(["serve", "--config", str(config)])
    return str(path), args


def test_a_model_that_cannot_be_loaded_is_a_503_naming_the_entry(
    unloadable: tuple[str, argparse.Namespace],
) -> None:
    path, args = unloadable
    with ServedApp(create_app(served_models(args))) as served:
        chat = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
        claude = anthropic.Anthropic(base_url=served.url, api_key="x", max_retries=0)
        asked = [{"role": "user", "content": "hi"}]
        calls = [
            lambda: chat.chat.completions.create(model="broken", messages=asked),  # type: ignore[arg-type]
            lambda: chat.chat.completions.create(model="broken", messages=asked, stream=True),  # type: ignore[arg-type]
            lambda: chat.responses.create(model="broken", input="hi"),
            lambda: claude.messages.create(model="broken", max_tokens=16, messages=asked),  # type: ignore[arg-type]
        ]
        for call in calls:
            with pytest.raises((openai.APIStatusError, anthropic.APIStatusError)) as caught:
                call()
            error = caught.value
            assert error.status_code == 503, error
            text = str(error.body)
            assert "the model 'broken' could not be loaded" in text, text
            assert "secret-dir" not in text and path not in text and "Traceback" not in text
