"""``toolwire families`` and the README's family table, both generated from what each
family declares; and the declarations themselves, as the registry gathers them."""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from toolwire import family_names, get_family
from toolwire.cli import main
from toolwire.cli.families import END, START, markdown, update
from toolwire.formats import declared, declared_json, declared_named, reasoning, registry
from toolwire.formats.declared import DECLARED
from toolwire.formats.detect import COMMON_END_TOKENS, GENERIC_END_TOKENS
from toolwire.formats.samples import sample_arguments

from .family_cases import modules_listing

README = Path(__file__).parent.parent / "README.md"


def _section(text: str) -> str:
    at, end = text.index(START) + len(START), text.index(END)
    return text[at:end].lstrip("\n")


def test_the_readme_table_is_the_generated_one() -> None:
    """Regenerate it with ``toolwire families --update README.md``."""
    assert _section(README.read_text(encoding="utf-8")) == markdown(registry.describe_families())


def test_families_json_names_every_family_with_its_declaration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["families", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == family_names()
    by_name = {r["name"]: r for r in rows}
    assert by_name["mistral"]["thinking"] == ["[THINK]…[/THINK]"]
    assert by_name["hermes"]["markers"] == ["<tool_call>"]
    assert by_name["hermes"]["models"] == "Qwen2.5, Qwen3, Hermes 2/3, Granite 4"
    for row in rows:
        family = get_family(row["name"])
        assert row["constrained"] is (getattr(family, "grammar", None) is not None)
        assert row["markers"] == list(family.markers)


def test_families_prints_a_line_per_family(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["families"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "models", "markers", "thinking", "constrained"]
    assert [line.split()[0] for line in lines[1:]] == family_names()
    assert all(line.split()[-1] in ("yes", "no") for line in lines[1:])


def test_update_rewrites_only_the_marked_section(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"before\n{START}\nstale\n{END}\nafter\n", encoding="utf-8")
    assert main(["families", "--update", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert text.startswith(f"before\n{START}\n| name |")
    assert text.endswith(f"|\n{END}\nafter\n")
    assert "stale" not in text
    assert update(text, registry.describe_families()) == text  # regenerating changes nothing


def test_update_without_markers_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "page.md"
    page.write_text("no table here\n", encoding="utf-8")
    assert main(["families", "--update", str(page)]) == 2
    assert "families:start" in capsys.readouterr().err
    assert page.read_text(encoding="utf-8") == "no table here\n"


def test_a_pipe_in_a_marker_does_not_split_the_markdown_row() -> None:
    row = {
        "name": "x",
        "models": "X <1>",
        "markers": ["<|a|>"],
        "thinking": [],
        "constrained": False,
    }
    line = markdown([row]).splitlines()[2]
    assert line == "| `x` | X &lt;1&gt; | `<\\|a\\|>` |  | no |"


# ---------------------------------------------------------------- the declarations gathered


def test_the_end_tokens_are_every_familys_and_the_generic_ones() -> None:
    declared = {t for name in family_names() for t in get_family(name).end_tokens}
    assert set(COMMON_END_TOKENS) == declared | set(GENERIC_END_TOKENS)
    assert "<|im_end|>" in get_family("hermes").end_tokens
    assert len(COMMON_END_TOKENS) == len(set(COMMON_END_TOKENS))


def test_every_familys_thinking_tags_are_recognised_by_every_stream() -> None:
    known = reasoning.known_tags()
    for name in family_names():
        tags = get_family(name).reasoning
        assert tags.blocks.items() <= known.blocks.items(), name
        assert tags.answers.items() <= known.answers.items(), name
        assert set(tags.channel_openers) <= set(known.channel_openers), name
    # Seed-OSS declares <seed:think>; Hermes's stream splits it off all the same
    result = get_family("hermes").parse("<seed:think>hmm</seed:think>Hello")
    assert (result.reasoning, result.content) == ("hmm", "Hello")


def test_a_splitter_given_one_familys_tags_reads_only_those() -> None:
    mistral = get_family("mistral").reasoning
    pieces = reasoning.ReasoningSplitter(tags=mistral).feed("<think>a</think>b")
    assert pieces == [(False, "<think>a</think>b")]
    pieces = reasoning.ReasoningSplitter(tags=mistral).feed("[THINK]a[/THINK]b")
    assert pieces == [(True, "a"), (False, "b")]


def _declared_in(name: str) -> str:
    """The module whose top level declares the syntax called ``name``."""
    syntax = DECLARED[name]
    for module in (declared_json, declared_named, declared):
        if any(value is syntax for value in vars(module).values()):
            return module.__name__
    raise AssertionError(name)


@pytest.mark.parametrize("name", family_names())
def test_a_familys_kept_tokens_are_written_in_its_grammar(name: str) -> None:
    """Each token a family declares kept is one its calls are written with: in a sample
    call, or in the module that reads them, or declares them (an optional word no sample
    writes, K2 Horizon's ``<ifm|arg_type>``)."""
    family = get_family(name)
    written = "".join(family.sample(i) for i in range(len(family.samples)))
    module = sys.modules[type(family).__module__]
    if name in DECLARED:  # its declaration's module
        module = sys.modules[_declared_in(name)]
    assert module.__file__ is not None
    source = Path(module.__file__).read_text(encoding="utf-8")
    used = 0 if name in DECLARED else 1  # (a hand-written module names it, then uses it)
    for token in family.kept_tokens:
        assert token in written or source.count(token) > used, (name, token)
    assert family.special_tokens[: len(family.markers)] == tuple(dict.fromkeys(family.markers))


def test_the_kept_tokens_include_every_familys_markers() -> None:
    kept = set(registry.kept_tokens())
    for name in family_names():
        assert set(get_family(name).markers) <= kept, name


@pytest.mark.parametrize("name", family_names())
def test_every_form_of_a_familys_sample_is_its_call(name: str) -> None:
    family = get_family(name)
    assert family.samples, f"{name} declares no sample call"
    for index in range(len(family.samples)):
        result = family.parse(family.sample(index))
        assert [c.name for c in result.calls] == ["write_file"], (name, index)
        assert result.calls[0].arguments["path"] == sample_arguments(index)["path"]


# ---------------------------------------------------------------- one module per family


def _family_modules() -> dict[str, Path]:
    """The module of each registered family, by its dotted name."""
    out = {}
    for name in family_names():
        module = sys.modules[type(get_family(name)).__module__]
        assert module.__file__ is not None
        out[module.__name__] = Path(module.__file__)
    return out


def _cross_imports(dotted: str, source: str, modules: Mapping[str, Path]) -> list[str]:
    """What the module ``dotted`` (its ``source``) imports that it should not: another
    family's module, or a name private to any module."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom) or node.level != 1:
            continue
        target = f"toolwire.formats.{node.module}"
        if target in modules and target != dotted:
            problems.append(f"{dotted} imports {target}")
        problems += [
            f"{dotted} imports {alias.name} from {target}"
            for alias in node.names
            if alias.name.startswith("_")
        ]
    return problems


def test_no_family_module_imports_another_or_a_private_name() -> None:
    """Shared steps live in shared modules with public names; a family's module imports
    those, never another family's module nor a name private to another module."""
    modules = _family_modules()
    assert len(modules) >= 5  # fewer as families move to declarations
    problems = [
        problem
        for dotted, path in modules.items()
        for problem in _cross_imports(dotted, path.read_text(encoding="utf-8"), modules)
    ]
    assert problems == []


def test_the_check_sees_a_cross_import() -> None:
    modules = _family_modules()
    source = "from .glimmer import Glimmer\nfrom .reasoning import _START, THINK\n"
    assert _cross_imports("toolwire.formats.mistral", source, modules) == [
        "toolwire.formats.mistral imports toolwire.formats.glimmer",
        "toolwire.formats.mistral imports _START from toolwire.formats.reasoning",
    ]
    own = "from .base import Family\nfrom .textargs import TextBody\n"
    assert _cross_imports("toolwire.formats.mistral", own, modules) == []


def test_the_family_test_modules_are_found_by_their_lists() -> None:
    found = {m.__name__.rsplit(".", 1)[-1] for m in modules_listing("MY_VALID")}
    assert found >= {
        "test_families_channels",
        "test_families_glm_kimi_minimax",
        "test_families_hunyuan_inkling",
        "test_families_pythonic_gemma",
        "test_families_xml_more",
    }
    assert found == {m.__name__.rsplit(".", 1)[-1] for m in modules_listing("MY_REPLIES")}
