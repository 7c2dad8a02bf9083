"""The command line starts without what the command run does not need: ``toolwire --help``
and ``toolwire parse`` load neither the gateway (starlette, uvicorn, toolwire.server), nor
the engine (llama_cpp), nor the HTTP client (httpx), nor rich. Each run is a fresh process;
what it loaded is read from its ``sys.modules``. (How long it takes is printed by
benchmarks/startup.py, never asserted.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: Runs the command line as ``toolwire`` does, then writes the modules it loaded to a file.
_PROBE = """
import json, sys
from toolwire.cli import main
out, argv = sys.argv[1], sys.argv[2:]
try:
    code = main(argv)
except SystemExit as exc:
    code = exc.code
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""

#: What a command that does not serve, generate or draw a progress bar must not load.
HEAVY = ("starlette", "uvicorn", "llama_cpp", "httpx", "httpcore", "rich", "toolwire.server")

REPLY = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def _loaded(tmp_path: Path, *argv: str, stdin: str = "") -> tuple[int, list[str]]:
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.exists(), done.stderr
    data = json.loads(out.read_text())
    return data["code"], data["modules"]


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["parse", "--help"],
        ["parse", "--format", "hermes"],
        ["parse", "--format", "words", "--chunk", "4"],
    ],
)
def test_the_command_line_loads_no_gateway_engine_or_http_client(
    tmp_path: Path, argv: list[str]
) -> None:
    code, modules = _loaded(tmp_path, *argv, stdin=REPLY)
    assert code == 0
    assert _heavy(modules) == []
    assert "toolwire.cli" in modules


@pytest.mark.parametrize(
    "argv",
    [
        ["parse", "--help"],
        ["detect", "--help"],
        ["args", "--help"],
        ["chat", "--help"],
        ["args", "--schema", "x.json", "--help"],
    ],
)
def test_help_loads_no_family(tmp_path: Path, argv: list[str]) -> None:
    """A command's help names no families (``FORMAT``): they load on first use."""
    code, modules = _loaded(tmp_path, *argv)
    assert code == 0
    assert [m for m in modules if m.startswith("toolwire.formats.")] == []


def test_a_format_is_checked_when_given(tmp_path: Path) -> None:
    from toolwire.cli.read import WORDS
    from toolwire.formats.registry import FORMAT_SETTINGS
    from toolwire.formats.words import Words

    assert Words.name == WORDS and FORMAT_SETTINGS == ("auto", "none")
    done = subprocess.run(
        [sys.executable, "-m", "toolwire", "parse", "--format", "nope"],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "unknown tool format 'nope'" in done.stderr and "hermes" in done.stderr
    for name in ("hermes", "words", "none"):
        done = subprocess.run(
            [sys.executable, "-m", "toolwire", "parse", "--format", name],
            input="Hello.",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0 and "Hello." in done.stdout, (name, done.stderr)


def test_help_builds_no_commands_arguments(tmp_path: Path) -> None:
    """``toolwire --help`` lists the commands without importing them: no formats, no
    templates, no argument reader."""
    _, modules = _loaded(tmp_path, "--help")
    loaded = [m for m in modules if m.startswith("toolwire.")]
    assert sorted(loaded) == ["toolwire.cli", "toolwire.errors"]


def test_reading_one_call_loads_only_its_reader(tmp_path: Path) -> None:
    """``parse`` without tools reads with its family's reader alone: the schema checker,
    the template engine and the reader for tools in words load when a command needs them."""
    code, modules = _loaded(tmp_path, "parse", "--format", "hermes", stdin=REPLY)
    assert code == 0
    roots = {m.split(".")[0] for m in modules}
    assert roots.isdisjoint({"jsonschema", "jinja2", "re2", "orjson"})
    assert "toolwire.formats.words" not in modules
    assert "toolwire.arguments.pipeline" not in modules


def test_parse_still_reads_and_types_with_tools(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            [
                {
                    "name": "get_weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                }
            ]
        )
    )
    code, modules = _loaded(
        tmp_path, "parse", "--format", "hermes", "--tools", str(tools), stdin=REPLY
    )
    assert code == 0 and _heavy(modules) == []
    assert "toolwire.arguments.pipeline" in modules  # typed by the schema


def test_a_command_that_serves_still_loads_the_gateway_when_it_runs(tmp_path: Path) -> None:
    """The other side: ``serve`` refusing its flags has imported its implementation (the
    config reader, in the gateway's package) only once it ran."""
    code, modules = _loaded(tmp_path, "serve", "--config", str(tmp_path / "none.toml"))
    assert code == 2
    assert "toolwire.server.config" in modules
    code, modules = _loaded(tmp_path, "serve", "--help")
    assert code == 0 and _heavy(modules) == []
