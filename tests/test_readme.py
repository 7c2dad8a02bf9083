"""Docs that run: the README's and every ``docs/*.md`` page's examples, executed as a new
user would, each test named by the page its example is on.

Every ```python block runs; one that talks to ``toolwire serve`` runs against the gateway
served here in front of the real local model (its URL swapped in), and the tool-loop example
runs on the real local model as written. Every ```sh block runs line by line from the
repository's root, except the quick start's install commands (they install; this is the
test command itself). The ```text block after ``toolwire args`` is exactly what that command
prints. The ```shell blocks are run by the tests that own them (``tests/test_store_cli.py``,
``tests/test_mcp_local.py``), which keep them off a real home and on a free port. Every
link from one page to another leads to a page, and to a heading on it.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolwire.server import create_app
from toolwire.testing import ServedApp

ROOT = Path(__file__).parent.parent
#: The README first, then the docs pages, by name.
PAGES = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]
TEXT = {page: (ROOT / page).read_text(encoding="utf-8") for page in PAGES}
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)
SERVE_URL = "http://127.0.0.1:8000"  # where `toolwire serve` listens


def blocks(page: str, language: str) -> list[str]:
    return [m.group(2) for m in BLOCK.finditer(TEXT[page]) if m.group(1) == language]


def _is_install(block: str) -> bool:
    return "pip install" in block or "scripts/test" in block


def _toolwire(line: str) -> list[str]:
    """A documented command line as argv, the installed script replaced by this interpreter."""
    argv = shlex.split(line, comments=True)
    assert argv[0] == "toolwire", line
    return [sys.executable, "-m", "toolwire", *argv[1:]]


def _run(line: str) -> subprocess.CompletedProcess[str]:
    """One shell line (``cmd < file`` at most), run from the repository's root."""
    command, _, stdin_path = line.partition(" < ")
    stdin_path = stdin_path.split("#", 1)[0].strip()
    stdin = (ROOT / stdin_path).read_text() if stdin_path else ""
    return subprocess.run(
        _toolwire(command),
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )


def _shell_lines(page: str) -> list[str]:
    lines = []
    for block in blocks(page, "sh"):
        if _is_install(block):
            continue
        lines += [ln for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]
    return lines


def _lines(keep: Callable[[str], bool]) -> list[Any]:
    """Every page's shell lines that ``keep`` takes, as parameters named by their page."""
    return [
        pytest.param(page, line, id=f"{page}: {line}")
        for page in PAGES
        for line in _shell_lines(page)
        if keep(line)
    ]


def _talks_to_the_gateway(code: str) -> bool:
    return SERVE_URL in code


def _is_chat_completions(code: str) -> bool:
    return _talks_to_the_gateway(code) and "chat.completions" in code


def _is_responses_and_messages(code: str) -> bool:
    return _talks_to_the_gateway(code) and "Anthropic(" in code


def _is_tool_loop(code: str) -> bool:
    return "run_loop_sync" in code and "default_model_path" in code


#: The kinds of example with a test of their own (below); every other example just runs.
_KINDS = (_is_tool_loop, _is_chat_completions, _is_responses_and_messages)


def _examples(keep: Callable[[str], bool]) -> list[Any]:
    """Every page's ```python blocks that ``keep`` takes, as parameters named by their page
    and their place on it."""
    return [
        pytest.param(page, code, id=f"{page}: python block {i}")
        for page in PAGES
        for i, code in enumerate(blocks(page, "python"), 1)
        if keep(code)
    ]


def _slug(heading: str) -> str:
    """The anchor a Markdown heading gets (GitHub's rule: lower case, punctuation dropped,
    spaces made hyphens)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: str) -> set[str]:
    text = BLOCK.sub("", TEXT[page])  # a "#" line inside a code block is no heading
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}


def test_the_pages_have_the_examples_this_test_runs() -> None:
    python = [code for page in PAGES for code in blocks(page, "python")]
    assert sum(map(_is_chat_completions, python)) == 1
    assert sum(map(_is_responses_and_messages, python)) == 1
    assert sum(map(_is_tool_loop, python)) == 1
    assert all(map(_talks_to_the_gateway, filter(_is_chat_completions, python)))
    assert len(_lines(lambda line: True)) >= 6
    assert len(_lines(lambda line: "toolwire chat" in line)) == 1
    installs = [page for page in PAGES for b in blocks(page, "sh") if _is_install(b)]
    assert installs == ["README.md"]  # only the quick start is skipped


def test_the_readme_links_every_docs_page() -> None:
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)(?:#[\w-]*)?\)", TEXT["README.md"]))
    assert linked == set(PAGES[1:])


@pytest.mark.parametrize("page", PAGES)
def test_each_link_to_a_page_leads_to_it(page: str) -> None:
    for target, anchor in re.findall(r"\]\(([\w./-]+\.md)(?:#([\w-]+))?\)", TEXT[page]):
        path = os.path.normpath(os.path.join(os.path.dirname(page), target))
        assert path in TEXT, f"{page} links {target}, which is not a page"
        if anchor:
            assert anchor in _anchors(path), f"{page} links {target}#{anchor}: no such heading"


@pytest.mark.parametrize(("page", "line"), _lines(lambda line: "toolwire chat" not in line))
def test_each_command_line_example_runs(page: str, line: str) -> None:
    done = _run(line)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    expected = re.search(r"# the family: (\S+)", line)
    if expected:
        assert done.stdout.splitlines()[0] == expected.group(1)


@pytest.mark.parametrize(("page", "line"), _lines(lambda line: "toolwire chat" in line))
def test_the_chat_example_runs_the_calculator_on_the_real_model(
    page: str, line: str, qwen_gguf: Path
) -> None:
    done = _run(line)
    assert done.returncode == 0, done.stderr
    assert "→ calculator(" in done.stdout
    assert "← 391" in done.stdout


@pytest.mark.parametrize(
    "page", [page for page in PAGES if any("don't fit" in b for b in blocks(page, "text"))]
)
def test_the_args_explanation_is_what_the_command_prints(page: str) -> None:
    command = re.search(r"`(toolwire args [^`]*bad_arguments[^`]*)`", TEXT[page])
    assert command is not None
    done = _run(command.group(1))
    assert done.returncode == 1
    (shown,) = [b for b in blocks(page, "text") if "don't fit" in b]
    assert done.stdout == shown


def _exec(code: str, page: str) -> dict[str, Any]:
    space: dict[str, Any] = {"__name__": "docs"}
    exec(compile(code, str(ROOT / page), "exec"), space)
    return space


def _served(code: str, served: ServedApp) -> str:
    return code.replace(SERVE_URL, served.url)


@pytest.mark.parametrize(("page", "code"), _examples(_is_chat_completions))
def test_the_openai_client_example_calls_a_tool_through_the_gateway(
    page: str, code: str, llama_backend: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with ServedApp(create_app(llama_backend, model_name="toolwire")) as served:
        _exec(_served(code, served), page)
    out = capsys.readouterr().out
    assert "name='get_weather'" in out and "Paris" in out


@pytest.mark.parametrize(("page", "code"), _examples(_is_responses_and_messages))
def test_the_responses_and_messages_example_calls_a_tool_through_the_gateway(
    page: str, code: str, llama_backend: Any
) -> None:
    with ServedApp(create_app(llama_backend, model_name="toolwire")) as served:
        space = _exec(_served(code, served), page)
    (call,) = [o for o in space["response"].output if o.type == "function_call"]
    assert call.name == "get_weather" and "oslo" in call.arguments.lower()
    message = space["message"]
    (use,) = [b for b in message.content if b.type == "tool_use"]
    assert message.stop_reason == "tool_use" and use.input["city"].lower() == "oslo"
    (fn,) = space["reply"].function_calls
    assert fn.name == "get_weather" and fn.args["city"].lower() == "oslo" and fn.id


@pytest.mark.parametrize(("page", "code"), _examples(_is_tool_loop))
def test_the_tool_loop_example_runs_on_the_real_model(
    page: str, code: str, qwen_gguf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _exec(code, page)
    lines = capsys.readouterr().out.splitlines()
    runs = [ln for ln in lines if ln.startswith("ToolRun(")]
    results = [ln for ln in lines if ln.startswith("ToolResult(")]
    # at temperature 0 the default model, given the result, writes get_weather(Paris, 3)
    # again: the pipeline drops that repeat, names it, and asks once more without tools;
    # the answer ends the reply
    assert len(runs) == 1
    assert "name='get_weather', arguments={'city': 'Paris', 'days': 3}" in runs[0]
    assert len(results) == 1 and '"forecast": "sunny"' in results[0]
    assert sum(ln.startswith("Notice(code='repeated-call'") for ln in lines) == 1
    assert not any("calls-after-bound" in ln for ln in lines)
    after = lines[next(i for i, ln in enumerate(lines) if "repeated-call" in ln) :]
    answer = "".join(
        ast.literal_eval(ln[len("TextDelta(text=") : -1])  # the repr of the text
        for ln in after
        if ln.startswith("TextDelta(")
    )
    assert "sunny" in answer and "{" not in answer
    assert lines[-1].startswith("Done(finish_reason='stop'")


@pytest.mark.parametrize(
    ("page", "code"),
    _examples(lambda code: not any(kind(code) for kind in _KINDS)),
)
def test_every_other_python_example_runs(
    page: str, code: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # as from a checkout: its paths are the repository's
    if _talks_to_the_gateway(code):  # the real local model, loaded only for such an example
        backend = request.getfixturevalue("llama_backend")
        with ServedApp(create_app(backend, model_name="toolwire")) as served:
            _exec(_served(code, served), page)
    else:
        _exec(code, page)
