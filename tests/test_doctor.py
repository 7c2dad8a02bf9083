"""``toolwire doctor``: every published template checked end to end, and the reasons given.

A template's expected verdict comes from the detection table: a template whose family
toolwire reads must pass (its own calls go through it and back exactly); a template with
no family must fail and say its calls will be text and its tools offered in words. When a
new family turns a row from ``none`` into a name, this test expects a pass by itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from toolwire import ChatTemplate, load_template
from toolwire.cli import main
from toolwire.doctor import DOCTOR_CALLS, Check, Report, diagnose

from .test_detect import EXPECTED, ONE_CALL_A_TURN, PROMPT_ONLY

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"
ROOT = Path(__file__).parent.parent

#: Templates with no tool format at all: no family will ever read them.
WITHOUT_TOOL_FORMAT = (
    "google-gemma-2-2b-it.jinja",
    "microsoft-Phi-3.5-mini-instruct.jinja",
    "llama-cpp-rwkv-world.jinja",
    "HuggingFaceTB-SmolLM3-3B.jinja",
)
TEXT_AND_WORDS = "its calls will be read as text; tools will be offered in words"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def check(report: Report, name: str) -> Check:
    (found,) = [c for c in report.checks if c.name == name]
    return found


# ------------------------------------------------------------------ the corpus


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_corpus_template(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    expected = EXPECTED[name]
    code, out, err = run(["doctor", str(FIXTURES / name)], capsys)
    assert err == "" and "Traceback" not in out
    lines = out.splitlines()
    assert lines[-1] == diagnose(load_template(FIXTURES / name)).verdict  # the last line
    checks = lines[1:-1]
    assert checks and all(ln[:2] in ("✓ ", "✗ ", "! ") for ln in checks)
    if expected == "none":
        assert code == 1
        assert checks[0].startswith("✗ family: no family reads this template's calls")
        assert TEXT_AND_WORDS in checks[0] and "(the tool format 'none')" in checks[0]
        assert lines[-1].startswith("no tool calling in this template's own format")
    elif name in PROMPT_ONLY:  # the format is read, but the template shows no past calls
        assert code == 1
        assert checks[0].startswith(f"✓ family: {expected}: ")
        assert checks[1].startswith("✗ calls shown: the template never shows a model's past")
    else:
        assert code == 0, out
        assert checks[0].startswith(f"✓ family: {expected}: ")
        assert lines[-1].startswith(
            f"tool calling works with this template: calls are read as {expected}"
        )
        assert not any(ln.startswith("✗ ") for ln in checks)


@pytest.mark.parametrize(
    "name", sorted(k for k, v in EXPECTED.items() if v != "none" and k not in PROMPT_ONLY)
)
def test_a_passing_template_reads_both_calls_back_exactly(name: str) -> None:
    report = diagnose(load_template(FIXTURES / name))
    assert report.ok and report.format == EXPECTED[name]
    parallel = check(report, "parallel calls")
    one_at_a_time = "renders only one call per turn" in parallel.message
    assert one_at_a_time == (EXPECTED[name] in ONE_CALL_A_TURN)
    n = 1 if one_at_a_time else 2
    assert check(report, "calls read").message == f"{n} of {n} calls read back"
    arguments = check(report, "arguments").message
    for call in DOCTOR_CALLS[:n]:
        assert call.name in arguments
    assert '"just in case\\".\\nSee you at 6.' in arguments or n == 1
    assert check(report, "no markup left").ok
    assert check(report, "tool result").ok


@pytest.mark.parametrize("name", WITHOUT_TOOL_FORMAT)
def test_a_template_without_a_tool_format_says_calls_are_text(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert EXPECTED[name] == "none"
    code, out, _ = run(["doctor", str(FIXTURES / name)], capsys)
    assert code == 1
    assert f"✗ family: no family reads this template's calls: {TEXT_AND_WORDS}" in out
    report = diagnose(load_template(FIXTURES / name))
    assert not report.ok and report.format == "none"
    assert "offer the tools in words and read calls from the reply's text" in report.verdict
    # nothing to read calls back with: no round-trip checks are claimed
    assert [c.name for c in report.checks if c.required] == ["family"]


def test_with_no_family_the_conversation_is_checked_in_words() -> None:
    # Phi-3.5's template ignores tool calls and tool messages, but with no family toolwire
    # sends the tools and results in words: that is the conversation the doctor renders
    phi = diagnose(load_template(FIXTURES / "microsoft-Phi-3.5-mini-instruct.jinja"))
    assert "(it writes no call at all)" in check(phi, "family").message
    assert check(phi, "tool result").message == "the tool's result reaches the prompt (in words)"
    assert check(phi, "tools offered").message == "the tools are named in the prompt (in words)"
    # Gemma 2 refuses most probe conversations (roles must alternate) and writes no call in
    # the one it renders; the conversation's refusal is in its own words, no traceback
    gemma = diagnose(load_template(FIXTURES / "google-gemma-2-2b-it.jinja"))
    assert "(it writes no call at all)" in check(gemma, "family").message
    conversation = check(gemma, "conversation")
    assert not conversation.ok and not conversation.required
    assert conversation.message.startswith("the template refuses a tool conversation (in words)")
    assert "System role not supported" in conversation.message


def test_a_template_that_never_describes_the_tools_still_round_trips() -> None:
    # DeepSeek V3.1's template writes calls but never lists the tools: advice, not failure
    report = diagnose(load_template(FIXTURES / "deepseek-ai-DeepSeek-V3.1.jinja"))
    offered = check(report, "tools offered")
    assert not offered.ok and not offered.required
    assert "send_note is nowhere in the prompt" in offered.message
    assert report.ok and report.verdict.endswith("(but see: tools offered)")


def test_a_generation_prompt_that_opens_thinking_is_named() -> None:
    report = diagnose(load_template(FIXTURES / "Qwen3.5-4B.jinja"))
    assert check(report, "thinking").message.startswith(
        "the generation prompt opens a thinking block"
    )
    assert report.ok
    assert not [
        c
        for c in diagnose(load_template(FIXTURES / "Qwen3-Coder.jinja")).checks
        if c.name == "thinking"
    ]


# ------------------------------------------------------------------ why not, by hand

# A small Hermes-style ChatML template; each test below breaks one thing in it. Detection
# probes ONE call with a string and an integer, so it still names the family: the doctor's
# two calls (with a boolean, a quote and a newline) are what find the fault.
HERMES = (
    "{%- if tools %}<|im_start|>system\n"
    "{% for t in tools %}{{ t.function.name }}\n{% endfor %}<|im_end|>\n{% endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
    "{%- if m.role == 'tool' %}{{ TOOL_RESULT }}{% elif m.content %}{{ m.content }}{% endif %}"
    "{%- if m.tool_calls %}{% for tc in m.tool_calls %}{{ BETWEEN }}<tool_call>\n"
    '{"name": "{{ tc.function.name }}", "arguments": {{ ARGUMENTS }}}\n</tool_call>'
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def hermes(
    *,
    arguments: str = "tc.function.arguments | tojson",
    between: str = "",
    tool_result: str = "m.content",
    calls: str = "m.tool_calls",
) -> ChatTemplate:
    source = (
        HERMES.replace("{{ ARGUMENTS }}", "{{ " + arguments + " }}")
        .replace("{{ BETWEEN }}", between)
        .replace("{{ TOOL_RESULT }}", "{{ " + tool_result + " }}")
        .replace("for tc in m.tool_calls", f"for tc in {calls}")
    )
    return ChatTemplate(source, eos_token="<|im_end|>", name="hand-made")


def test_the_hand_made_template_passes() -> None:
    report = diagnose(hermes())
    assert report.ok and report.format == "hermes"
    assert all(c.ok for c in report.checks)
    assert check(report, "parallel calls").message == "the template writes two calls in one turn"


def test_different_arguments_are_shown_expected_and_got() -> None:
    # the template turns the newline escape into a space: the note's text changes
    report = diagnose(hermes(arguments="tc.function.arguments | tojson | replace('\\\\n', ' ')"))
    assert not report.ok and report.format == "hermes"
    message = check(report, "arguments").message
    assert message.startswith("calls read back with different arguments: expected send_note(")
    assert '"just in case\\".\\nSee you at 6.' in message  # expected
    assert '"just in case\\". See you at 6.' in message  # got
    assert "get_weather" not in message  # the first call read back right
    assert report.verdict == f"tool calling will not work as the template means it: {message}"


def test_arguments_that_do_not_fit_the_schema_are_explained(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # the template writes the boolean as the word "yes": typing by the schema refuses it
    tpl = hermes(arguments="tc.function.arguments | tojson | replace('true', '\"yes\"')")
    report = diagnose(tpl)
    assert not report.ok and check(report, "calls read").ok
    message = check(report, "arguments").message
    assert message.startswith("calls read back with different arguments: get_weather: ")
    assert 'metric: expected true or false, got the text "yes"' in message
    # the command prints the explanation on the check's one line
    path = tmp_path / "yes.jinja"
    path.write_text(tpl.source, encoding="utf-8")
    code, out, _ = run(["doctor", str(path)], capsys)
    assert code == 1
    (line,) = [ln for ln in out.splitlines() if ln.startswith("✗ arguments: ")]
    assert 'metric: expected true or false, got the text "yes"' in line


def test_a_call_the_family_cannot_read_is_counted_and_shown() -> None:
    # the second call's JSON loses its closing brace: one call read, the other left as text
    cut = "(tc.function.arguments | tojson)[:-1]"
    tpl = hermes(
        arguments=f"{cut} if tc.function.name == 'send_note' else tc.function.arguments | tojson"
    )
    report = diagnose(tpl)
    assert not report.ok
    read = check(report, "calls read")
    assert read.message.startswith("the family reads 1 of the 2 calls the template writes; ")
    assert "it stays reply text" in read.message  # the family's own notice
    assert "the template wrote: '<tool_call>" in read.message
    assert check(report, "no markup left").message.startswith(
        "markup is left in the reply text: '<tool_call>"
    )


def test_markup_left_between_calls_is_named() -> None:
    report = diagnose(hermes(between="{% if not loop.first %}and then {% endif %}"))
    assert not report.ok
    assert check(report, "no markup left").message == "markup is left in the reply text: 'and then'"
    assert check(report, "calls read").ok  # both calls read; the words between stay text


def test_a_template_that_drops_the_second_call_renders_one_a_turn() -> None:
    report = diagnose(hermes(calls="m.tool_calls[:1]"))
    parallel = check(report, "parallel calls")
    assert parallel.ok and parallel.message.startswith(
        "the template renders only one call per turn: parallel calls are read one at a time"
    )
    assert report.ok and check(report, "calls read").message == "1 of 1 calls read back"


def test_a_template_that_drops_the_tool_result() -> None:
    report = diagnose(hermes(tool_result="''"))
    result = check(report, "tool result")
    assert not result.ok and result.message.startswith("the template drops the tool result")
    assert report.ok  # the calls still round-trip; the lost result is advice


def test_a_template_that_refuses_the_doctors_tools_is_a_failed_check() -> None:
    source = HERMES.replace(
        "{%- if tools %}",
        "{%- if tools and tools | length > 1 %}{{ raise_exception('one tool only') }}{% endif %}"
        "{%- if tools %}",
    )
    tpl = ChatTemplate(
        source.replace("{{ ARGUMENTS }}", "{{ tc.function.arguments | tojson }}")
        .replace("{{ BETWEEN }}", "")
        .replace("{{ TOOL_RESULT }}", "{{ m.content }}"),
        eos_token="<|im_end|>",
        name="one-tool",
    )
    report = diagnose(tpl)
    assert report.format == "hermes" and not report.ok
    parallel = check(report, "parallel calls")
    assert not parallel.ok and parallel.message.startswith("the template cannot render a call: ")
    assert "one tool only" in parallel.message
    assert "one tool only" in check(report, "conversation").message


# ------------------------------------------------------------------ the command


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "Qwen3.5-4B.jinja"
    code, out, _ = run(["doctor", "--json", str(path)], capsys)
    data = json.loads(out)
    assert code == 0 and data["ok"] is True and data["format"] == "qwen-xml"
    assert data["source"] == str(path) and data["template"] == "Qwen3.5-4B"
    assert data["verdict"].startswith("tool calling works")
    names = [c["name"] for c in data["checks"]]
    assert names[:3] == ["family", "thinking", "parallel calls"]
    assert all(set(c) == {"name", "ok", "required", "message"} for c in data["checks"])
    code, out, _ = run(["doctor", "--json", str(FIXTURES / "llama-cpp-rwkv-world.jinja")], capsys)
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and data["format"] == "none"
    assert data["checks"][0] == {
        "name": "family",
        "ok": False,
        "required": True,
        "message": "no family reads this template's calls: its calls will be read as text; "
        "tools will be offered in words (the tool format 'none') (it writes no call at all)",
    }


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "toolwire", "doctor", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_the_command_passes_and_fails_as_a_process() -> None:
    done = _script(str(FIXTURES / "Qwen3-Coder.jinja"))
    assert done.returncode == 0, done.stderr
    assert "✓ family: qwen-xml: " in done.stdout and "✓ calls read: 2 of 2" in done.stdout
    done = _script(str(FIXTURES / "microsoft-Phi-3.5-mini-instruct.jinja"))
    assert done.returncode == 1 and done.stderr == ""
    assert TEXT_AND_WORDS in done.stdout


def test_a_terminal_without_the_marks_gets_words() -> None:
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "toolwire", "doctor", str(FIXTURES / "Qwen3-Coder.jinja")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "\nok family: qwen-xml" in done.stdout


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["doctor", str(tmp_path / "missing.jinja")], capsys)
    assert code == 2 and out == "" and err.startswith("toolwire: error:")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF\x03\x00\x00\x00 not really")
    code, out, err = run(["doctor", str(broken)], capsys)
    assert code == 2 and out == "" and err.startswith("toolwire: error:")
    done = _script(str(tmp_path / "missing.jinja"))
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_the_default_local_model(qwen_gguf: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # no path: the default model's GGUF, as `detect` does (reading a GGUF takes a while)
    code, out, _ = run(["doctor"], capsys)
    assert code == 0, out
    assert out.splitlines()[0].startswith(str(qwen_gguf))
    assert "✓ family: hermes: " in out and "✓ calls read: 2 of 2 calls read back" in out


def test_a_gguf_without_a_tool_format(
    smollm2_gguf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["doctor", str(smollm2_gguf)], capsys)
    assert code == 1
    assert TEXT_AND_WORDS in out


def test_the_docs_show_what_the_command_prints() -> None:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    (shown,) = [
        b for b in re.findall(r"^```text\n(.*?)^```$", page, re.M | re.S) if "✗ family:" in b
    ]
    path = shown.split(" ", 1)[0]
    done = _script(path)
    assert done.returncode == 1 and done.stdout == shown
