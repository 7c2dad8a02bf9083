"""Families declared as syntax values (:mod:`toolwire.formats.syntax`), against the
hand-written readers they replaced.

Before a declaration replaced its family's hand-written reader, what that reader read was
recorded (``tests/declared_reading.py``, into ``tests/fixtures/declared_golden.json``): every
development corpus case of the family (the held-out set is not read) and its near misses,
whole (strict and not) and streamed at several chunkings. The declaration must read each
case as the record says; the differences still left are listed with their reasons, and a
listed difference that goes away fails the run (the list only shrinks). The declaration's
writer writes calls its own grammar takes and its reader reads back, and its markers and
kept tokens — computed from the syntax, never listed — are what the hand-written family
listed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from toolwire import get_family
from toolwire.arguments.pipeline import prepare_arguments
from toolwire.formats.declared import DECLARED
from toolwire.formats.gbnf import constraint_for
from toolwire.formats.syntax import Syntax, special_words

from . import declared_reading as reading
from .declared_known import KNOWN
from .replies import TOOLS, WEATHER

ROOT = Path(__file__).resolve().parent.parent

GOLDEN = json.loads(reading.GOLDEN.read_text())

#: The families declared from the start: no hand-written reader came before them
#: (tests/test_families_declared_new.py, tests/test_families_dialects.py).
NEW = (
    "internlm2",
    "longcat",
    "step3",
    "functiongemma",
    "olmo3",
    "tagged-pythonic",
    "tagged-harmony",
    "invoke-xml",
    "k2v3-ifm",
    "xlam",
    "dots",
    "iquest",
    "telechat4",
    "plamo3",
    "solar-open2",
    "granite-20b-fc",
    "qwen25-coder",
    "step-audio2",
    "openpangu",
    "rwkv",
)
MIGRATED = sorted(set(DECLARED) - set(NEW))

PAIRS = [(name, case) for name in MIGRATED for case in reading.cases(name)]


def test_every_declaration_has_its_hand_written_reader_s_record() -> None:
    assert set(GOLDEN) == set(MIGRATED) and set(NEW) <= set(DECLARED)
    for name in MIGRATED:
        assert set(GOLDEN[name]) == {cid for cid, *_ in reading.cases(name)}, name


@pytest.mark.parametrize(("name", "case"), PAIRS, ids=[f"{n}:{c[0]}" for n, c in PAIRS])
def test_the_declaration_reads_as_the_hand_written_reader_did(
    name: str, case: tuple[str, str, list[dict[str, Any]], bool]
) -> None:
    cid, reply, tools, opened = case
    got = reading.reading(DECLARED[name].family, reply, tools, opened)
    same = got == GOLDEN[name][cid]
    why = KNOWN.get(name, {}).get(cid)
    if why is None:
        assert same, (cid, reply, got, GOLDEN[name][cid])
    else:
        assert not same, f"{cid} now agrees: take it off KNOWN ({why})"


def test_a_declared_family_is_the_registry_s() -> None:
    for name, syntax in DECLARED.items():
        assert get_family(name) is syntax.family


#: What the hand-written families listed, for the declared ones to compute.
LISTED = {
    # the hand-written family listed none: <|eom_id|> ends the interpreter's code (a token
    # the reader must see), and </function> is no special token in Llama 3.1's vocabulary
    "functionary-v3.1": (("<function=", "<|python_tag|>"), ("</function>", "<|eom_id|>")),
    "llama3": (("<|python_tag|>", "{"), ()),
    # the hand-written family also scanned for a call opened without its section: the
    # engine reads one where the section's words were left out, its token kept
    "deepseek-dsml": (("<｜DSML｜",), ()),
    "gigachat-gcml": (("<｜GCML｜",), ()),
    # (the hand-written family listed none: its tag prefix, a special token, was missing)
    "minimax-m3": (
        ("]<]minimax[>[<tool_call>",),
        ("]<]minimax[>[", "<tool_call>", "</invoke>", "</tool_call>"),
    ),
    "kimi-k2": (
        ("<|tool_calls_section_begin|>",),
        (
            "<|tool_call_begin|>",
            "<|tool_call_end|>",
            "<|tool_calls_section_end|>",
            "<|tool_call_argument_begin|>",
        ),
    ),
    # the list's end tag, which the hand-written family did not list: a special token
    "pythonic": (("<|python_start|>", "["), ("<|python_end|>",)),
    "functionary-v3.2": ((">>>",), ()),
    "hermes": (("<tool_call>",), ("</tool_call>",)),
    "granite": (("<|tool_call|>",), ()),
    "nemotron-v2": (("<TOOLCALL>",), ("</TOOLCALL>",)),
    "firefunction": (("functools[",), ()),
    "glm": (
        ("<tool_call>",),
        ("</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
    ),
    "apriel": (("<tool_calls>",), ("</tool_calls>",)),
    "apertus": (("<|tools_prefix|>",), ("<|tools_suffix|>",)),
    "command-r7b": (("<|START_ACTION|>",), ("<|END_ACTION|>",)),
    # the hand-written family listed only the block's closer; the engine keeps every closing
    # tag of the framing (Seed-OSS, MiniMax): a tokenizer without them as special tokens
    # writes them as text, and keeping a text that is no token changes nothing
    "seed-oss": (("<seed:tool_call>",), ("</function>", "</seed:tool_call>", "</parameter>")),
    "solar-open": (
        ("<|tool_calls|>",),
        (
            "<|tool_call:begin|>",
            "<|tool_call:name|>",
            "<|tool_call:end|>",
            "<|calls|>",
            "<|tool_call:args|>",
        ),
    ),
    # the hand-written family listed none: its tokens are the role separators of every
    # message, kept by every engine anyway
    "gigachat": (
        ("<|message_sep|>\n\nfunction call<|role_sep|>", "<|function_call|>"),
        ("<|message_sep|>", "<|role_sep|>"),
    ),
    # the namespaced form's tags too: HY3's and HY4's special tokens
    "hunyuan": (
        ("<tool_calls>", "<tool_calls:opensource>"),
        tuple(
            f"{tag[:-1]}{ns}>"
            for ns in ("", ":opensource")
            for tag in (
                "<tool_call>",
                "</tool_call>",
                "</tool_calls>",
                "<tool_sep>",
                "<arg_key>",
                "</arg_key>",
                "<arg_value>",
                "</arg_value>",
            )
        ),
    ),
    "minicpm3": (("<|tool_call_start|>",), ("<|tool_call_end|>",)),
    # (its list without the token, read as a repair where the reply starts: "[" as Llama 4's)
    "lfm2": (("<|tool_call_start|>", "["), ("<|tool_call_end|>",)),
    # the same tokens, in the framing's order
    "mistral": (("[TOOL_CALLS]",), ("[CALL_ID]", "[ARGS]")),
    "command-r-plus": (("Action:", "<|CHATBOT_TOKEN|>"), ()),
    "qwen-xml": (("<tool_call>",), ("</function>", "</tool_call>", "</parameter>")),
    "minimax": (("<minimax:tool_call>",), ("</invoke>", "</minimax:tool_call>", "</parameter>")),
    # the hand-written family listed none: its tags are no special tokens in MiniCPM5's
    # vocabulary, and keeping a text that is no token changes nothing
    "minicpm5": (('<function name="',), ("</function>", "</param>")),
    "minimax-m1": (("<tool_calls>",), ("</tool_calls>",)),
    "gemma4": (("<|tool_call>",), ("<tool_call|>", '<|"|>')),
    "deepseek-r1": (
        ("<｜tool▁calls▁begin｜>",),
        ("<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"),
    ),
    # the tokens the hand-written family listed, in the framing's order
    "deepseek-v3.1": (
        ("<｜tool▁calls▁begin｜>",),
        ("<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<｜tool▁sep｜>"),
    ),
}


@pytest.mark.parametrize("name", MIGRATED)
def test_the_tokens_are_computed_as_the_hand_written_family_listed_them(name: str) -> None:
    family = DECLARED[name].family
    assert (family.markers, family.kept_tokens) == LISTED[name]


CALLS: list[tuple[str, Mapping[str, Any]]] = [
    WEATHER,
    ("write_file", {"path": "a.py", "content": 'x = {"a": 1}\n'}),
]


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_the_writer_writes_what_the_grammar_takes_and_the_reader_reads_back(name: str) -> None:
    syntax: Syntax = DECLARED[name]
    reply = syntax.reply(CALLS)
    family = syntax.family
    got = family.parse(reply, TOOLS)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS if "function" in t}
    typed = [  # a tagged syntax writes every value as text: the argument pipeline types it
        (
            c.name,
            prepare_arguments(c.arguments, schemas[c.name], text_values=c.text_values).arguments,
        )
        for c in got.calls
    ]
    assert typed == [(n, dict(a)) for n, a in CALLS]
    assert got.content == "" and not got.notices
    for size in (1, 5):  # streamed, at any chunking, the same
        events = reading._events(family, reply, TOOLS, False, size)
        assert events == reading._events(family, reply, TOOLS, False, len(reply))
    llguidance = pytest.importorskip("llguidance")
    tokenizer = llguidance.LLTokenizer("byte")
    constraint = constraint_for(family, TOOLS)
    assert constraint is not None

    def takes(text: str) -> bool:
        grammar = llguidance.grammar_from("gbnf", constraint.grammar("family"))
        matcher = llguidance.LLMatcher(tokenizer, grammar)
        assert not matcher.is_error(), matcher.get_error()
        tokens = tokenizer.tokenize_str(text)
        return bool(matcher.try_consume_tokens(tokens) == len(tokens) and matcher.is_accepting())

    assert takes(reply)
    assert takes(syntax.write(*CALLS[0]))
    assert not takes(reply.replace("write_file", "write_fil"))  # no such tool
    # a value the schema refuses: a string for an integer (a tagged syntax writes "3" as 3,
    # so there: a word)
    wrong = "x" if syntax.shape.kind == "tags" else "3"
    assert not takes(syntax.write("get_weather", {"city": "Paris", "days": wrong}))


def test_special_words_are_found_in_the_framing() -> None:
    assert special_words(("<|tool_calls_begin|>", "</tool_call>", "[TOOL_CALLS]", "{")) == (
        "<|tool_calls_begin|>",
        "</tool_call>",
        "[TOOL_CALLS]",
    )
    assert special_words(("functions.", ":", "\n")) == ()


def test_a_declaration_is_a_few_lines() -> None:
    """Adding a family like Hermes is one declaration of at most ~30 lines."""
    source = (ROOT / "src" / "toolwire" / "formats" / "declared_json.py").read_text()
    start = source.index("HERMES = Syntax(")
    end = source.index("\n)\n", start)
    assert source[start:end].count("\n") + 1 <= 30
    assert json.dumps(DECLARED["hermes"].shape.to_json())  # the syntax is plain data
