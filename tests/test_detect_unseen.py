"""Detection of published templates the corpus lacks, and the mechanisms they called for.

The templates are in ``tests/fixtures/unseen_templates/`` (development material, byte for
byte, each named in its ``sources.json``). Each mechanism is tested where it matters:

- a GLM sibling whose generation prompt opens ``<think>`` and whose past calls follow an
  empty ``</think>`` (GLM-4.7-Flash): read inside the block the prompt opened;
- a turn's end learned from the template itself (MiniMax M1's ``<end_of_sentence>``, in no
  list of known tokens);
- the model's text found from a plain assistant turn when the conversation before a call
  renders otherwise than the generation prompt (vLLM's Mistral-parallel and DeepSeek V3.1);
- no claim without proof: a family must read the template's own rendering of two calls
  (a bare comma-separated list of JSON objects is not Llama 3's), checked over every
  template there is;
- prompts and unquoted Python values claim nothing they cannot back;
- a quoted Python boolean typed by the schema, and detection's renders bounded.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolwire import ChatTemplate, detect_format, get_family, load_template
from toolwire.arguments import prepare_arguments
from toolwire.errors import ArgumentsError, LimitError, TemplateError
from toolwire.events import Notice
from toolwire.formats import detect as detect_module
from toolwire.formats import turn as turn_module
from toolwire.formats.base import assemble
from toolwire.formats.detect import (
    COMMON_END_TOKENS,
    DERIVE_CALLS,
    DERIVE_TOOLS,
    PROBE_CALL,
    PROBE_TOOLS,
    Detection,
    assistant_text,
)
from toolwire.formats.turn import learned_end, plain_turns, with_sentinels
from toolwire.messages import ToolCall
from toolwire.templates import TemplateBudget

from .prepared import typed

HERE = Path(__file__).parent / "fixtures"
UNSEEN = HERE / "unseen_templates"
CORPUS = HERE / "chat_templates"
USER = {"role": "user", "content": "What will the weather be in Paris over the next 3 days?"}
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}

# What each development template teaches, read from the template by hand, and how it is found.
EXPECTED = {
    "GLM-4.7-Flash.jinja": ("glm", "probe"),
    "GigaChat3.1-10B-A1.8B.jinja": ("gigachat", "probe"),
    "GigaChat3.5.jinja": ("gigachat-gcml", "probe"),  # DSML's grammar, <｜GCML｜
    "Kimi-K2-Thinking.jinja": ("kimi-k2", "probe"),
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": ("mistral", "probe"),
    "Qwen-QwQ-32B.jinja": ("hermes", "probe"),
    "StepFun3.5-Flash.jinja": ("qwen-xml", "probe"),
    "gemma4.jinja": ("gemma4", "probe"),
    "ibm-granite-granite-4.1.jinja": ("hermes", "probe"),
    "llama-cpp-lfm2.jinja": ("lfm2", "prompt"),  # shows no calls; its prompt lists the tools
    "sglang-tool_and_thinking_chat_template_glm4.5.jinja": ("glm", "probe"),
    "sglang-tool_chat_template_phi4mini.jinja": ("firefunction", "probe"),  # functools[...]
    "upstage-Solar-Open-100B.jinja": ("solar-open", "probe"),
    "vllm-tool_chat_template_minimax_m1.jinja": ("minimax-m1", "probe"),
    "vllm-tool_chat_template_mistral_parallel.jinja": ("mistral", "probe"),
    "vllm-tool_chat_template_nemotron_json.jinja": ("nemotron-v2", "probe"),
    "glm_4_5.jinja": ("glm", "probe"),
    "mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja": ("mistral", "probe"),
    "sglang-tool_chat_template_deepseekv31.jinja": ("deepseek-v3.1", "probe"),
    "sglang-tool_chat_template_llama3.1_json.jinja": ("llama3", "probe"),
    "vllm-tool_chat_template_deepseekr1.jinja": ("deepseek-r1", "probe"),
    "vllm-tool_chat_template_deepseekv3.jinja": ("deepseek-r1", "probe"),  # R1's grammar
    "vllm-tool_chat_template_llama3.2_json.jinja": ("llama3", "probe"),
    "vllm-tool_chat_template_llama4_json.jinja": ("llama3", "probe"),
    # Python calls written by hand, read loosely (recovered-python-values)
    "vllm-tool_chat_template_gemma3_pythonic.jinja": ("pythonic", "probe"),  # no commas
    "vllm-tool_chat_template_gemma3_pythonic_both.jinja": ("pythonic", "probe"),
    "vllm-tool_chat_template_llama3.2_pythonic.jinja": ("pythonic", "probe"),  # unquoted
    "sglang-tool_chat_template_llama4_pythonic.jinja": ("pythonic", "probe"),  # no brackets
    "vllm-tool_chat_template_llama4_pythonic.jinja": ("pythonic", "probe"),  # quotes unescaped
    "vllm-tool_chat_template_internlm2_tool.jinja": ("internlm2", "probe"),
    # learned first, proved on the template's own renderings; now families declared from
    # the peers' readers (tests/test_families_peers_new.py), which detection names
    "vllm-tool_chat_template_granite_20b_fc.jinja": ("granite-20b-fc", "probe"),
    "vllm-tool_chat_template_qwen2_5_coder.jinja": ("qwen25-coder", "probe"),  # <tools>…</tools>
    # grammars no family reads, learned and proved on the template's own renderings
    "vllm-tool_chat_template_hyperclovax_seed_think_14b.jinja": ("derived", "derived"),
    "vllm-tool_chat_template_phi4_mini.jinja": ("derived", "derived"),  # bare JSON list
    "vllm-tool_chat_template_xlam_llama.jinja": ("xlam", "probe"),
    "llama-cpp-microsoft-Phi-4-mini-instruct.jinja": ("derived", "derived"),
    # nothing can be claimed: see the tests below for each reason
    "vllm-tool_chat_template_deepseekv31.jinja": ("none", ""),  # does not compile
    "vllm-tool_chat_template_minicpm3.jinja": ("minicpm3", "probe"),  # Python calls, fenced
    "vllm-tool_chat_template_mistral.jinja": ("none", ""),  # writes the content, not the calls
}


def unseen(name: str) -> ChatTemplate:
    return load_template(UNSEEN / name)


@functools.cache
def detected(path: Path) -> Detection:
    return detect_format(load_template(path))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_detection(name: str) -> None:
    found = detected(UNSEEN / name)
    assert (found.format, found.via) == EXPECTED[name]


# ------------------------------------------------------------------ no claim without proof

EVERY_TEMPLATE = sorted([*CORPUS.glob("*.jinja"), *UNSEEN.glob("*.jinja")])


def _turn(calls: tuple[ToolCall, ...], content: str | None, results: bool) -> list[Any]:
    turn: list[Any] = [
        {"role": "assistant", "content": content, "tool_calls": [c.to_openai() for c in calls]}
    ]
    for call in calls if results else ():
        turn.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": "{}"})
    return turn


def _renderings(path: Path, calls: tuple[ToolCall, ...]) -> Iterator[tuple[str, bool]]:
    """The template's text for a turn making ``calls``, as the detection asks for it: with
    and without a system message, tool results after the turn only when the template
    writes no calls without them."""
    found = detected(path)
    family = found.family
    assert family is not None
    content = None if found.none_content else ""
    for head in ([USER], [SYSTEM, USER]):
        for results in (False, True):
            try:
                text, opened = assistant_text(
                    load_template(path),
                    head,
                    _turn(calls, content, results),
                    DERIVE_TOOLS,
                    call_ids=family.call_ids,
                    keep_call_none=content is None,
                    start="turn" if found.start == "turn" else "auto",
                )
            except (TemplateError, LimitError):
                continue
            if calls[0].name in text:
                yield text, opened
                break


@pytest.mark.parametrize("path", EVERY_TEMPLATE, ids=lambda p: p.name)
def test_every_claim_reads_the_templates_own_two_calls(path: Path) -> None:
    """Whenever detection names a family or a learned shape, that family reads back the
    template's own rendering of both calls of DERIVE_CALLS (a markup-laden string, a line
    break, quotes, a boolean), typed by the schemas; a template that writes one call a turn
    (it drops the second, or refuses two) is read back on the second call alone. A claim from
    the prompt stands only for a template that renders no calls at all."""
    found = detected(path)
    family = found.family
    if family is None:
        assert found.format == "none"
        return
    if found.via == "prompt":
        assert not list(_renderings(path, DERIVE_CALLS[:1]))
        return
    checked = 0
    for text, opened in _renderings(path, DERIVE_CALLS):
        both = all(c.name in text for c in DERIVE_CALLS)
        calls = DERIVE_CALLS if both else DERIVE_CALLS[1:]
        if not both:
            text, opened = next(_renderings(path, DERIVE_CALLS[1:]))
        assert detect_module._reads(family, text, opened, calls), text
        checked += 1
    if not checked:  # the template refuses two calls in a turn: the second alone
        text, opened = next(_renderings(path, DERIVE_CALLS[1:]))
        assert detect_module._reads(family, text, opened, DERIVE_CALLS[1:]), text


def _probe_text(template: ChatTemplate, calls: tuple[ToolCall, ...]) -> tuple[str, bool]:
    return assistant_text(template, [USER], _turn(calls, "", False), DERIVE_TOOLS)


def test_a_bare_list_of_json_objects_is_not_llama3() -> None:
    """vLLM's Phi-4-mini template writes calls as ``{...},{...}``: Llama 3 reads one such
    object as its call, but not the template's two — so it no longer claims the template."""
    tpl = unseen("vllm-tool_chat_template_phi4_mini.jinja")
    llama3 = get_family("llama3")
    one, opened = _probe_text(tpl, DERIVE_CALLS[:1])
    two, opened_two = _probe_text(tpl, DERIVE_CALLS)
    assert two.startswith("{") and "},{" in two
    assert detect_module._reads(llama3, one, opened, DERIVE_CALLS[:1])
    assert not detect_module._reads(llama3, two, opened_two, DERIVE_CALLS)
    found = detect_format(tpl)
    assert found.format != "llama3" and found.family is not None
    assert found.unproven == ("llama3",)  # what toolwire doctor explains
    assert found.family.parse(two, DERIVE_TOOLS).calls[1].arguments == DERIVE_CALLS[1].arguments


def test_a_synthetic_bare_list_is_not_claimed_by_a_family_that_reads_one_call() -> None:
    """The same shape, written anew: whatever reads one bare object is no proof."""
    source = (
        "{% for m in messages %}<|{{ m.role }}|>{% if m.tool_calls %}"
        "{% for c in m.tool_calls %}{{ {'name': c.function.name, 'arguments': "
        "c.function.arguments} | tojson }}{% if not loop.last %}, {% endif %}{% endfor %}"
        "{% else %}{{ m.content }}{% endif %}<|stop|>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    tpl = ChatTemplate(source, eos_token="<|stop|>")
    found = detect_format(tpl)
    assert found.format != "llama3"  # which it was, before claims were proved
    assert found.family is not None  # a grammar learned from the renderings, and proved
    two, opened = _probe_text(tpl, DERIVE_CALLS)
    assert detect_module._reads(found.family, two, opened, DERIVE_CALLS)


def test_a_template_that_refuses_the_proofs_tools_keeps_the_probes_claim() -> None:
    """Nothing the template renders refutes the probe: one that accepts one tool only cannot
    render the proof's two, and the claim stands on the one call it reads."""
    guard = "{% if tools | length > 1 %}{{ raise_exception('one tool only') }}{% endif %}"
    tpl = ChatTemplate(guard + INVENTED_END, eos_token="<|fin|>")
    with pytest.raises(TemplateError, match="one tool only"):
        tpl.render([USER], DERIVE_TOOLS)
    found = detect_format(tpl)
    assert (found.format, found.unproven) == ("hermes", ())


def test_pythonic_values_with_unescaped_quotes_are_read_loosely() -> None:
    """vLLM's Llama 4 pythonic template quotes every value but escapes nothing inside: a quote
    closes a value only where a value can end, so the template's own two calls read back, the
    repair named; strict reads none of the second."""
    tpl = unseen("vllm-tool_chat_template_llama4_pythonic.jinja")
    pythonic = get_family("pythonic")
    one, opened = _probe_text(tpl, DERIVE_CALLS[:1])
    two, opened_two = _probe_text(tpl, DERIVE_CALLS)
    assert one == '[get_weather(city="Paris", days="3")]'
    assert detect_module._reads(pythonic, one, opened, DERIVE_CALLS[:1])
    assert '"wake"' in two and detect_module._reads(pythonic, two, opened_two, DERIVE_CALLS)
    stream = pythonic.stream(DERIVE_TOOLS)
    events = stream.feed(two) + stream.finish()
    read = assemble(events)
    assert [c.arguments["time"] for c in read.calls[1:]] == ['07:30\n<b>"wake" & go</b>']
    assert "recovered-python-values" in [e.code for e in events if isinstance(e, Notice)]
    assert not pythonic.parse(two, DERIVE_TOOLS, strict=True).calls
    assert (detect_format(tpl).format, detect_format(tpl).via) == ("pythonic", "probe")


# ------------------------------------------------------------------ GLM 4.7: thinking opened


def test_glm47_is_read_inside_the_block_its_prompt_opens() -> None:
    tpl = unseen("GLM-4.7-Flash.jinja")
    assert tpl.render([USER], PROBE_TOOLS).endswith("<|assistant|><think>")
    found = detect_format(tpl)
    assert (found.format, found.via, found.reasoning_open) == ("glm", "probe", True)
    # the past turn drops its thinking and writes the closer: the reply starts inside
    text, opened = assistant_text(tpl, [USER], _turn((PROBE_CALL,), "", False), PROBE_TOOLS)
    assert text.startswith("</think><tool_call>get_weather<arg_key>city</arg_key>") and opened
    reply = "The user wants Paris.</think><tool_call>get_weather<arg_key>city</arg_key>"
    reply += "<arg_value>Paris</arg_value></tool_call>"
    result = get_family("glm").parse(reply, PROBE_TOOLS, reasoning_open=True)
    assert result.reasoning == "The user wants Paris." and result.content == ""
    assert [(c.name, typed(c, PROBE_TOOLS)) for c in result.calls] == [
        ("get_weather", {"city": "Paris"})
    ]


def test_a_closer_starts_inside_a_block_only_when_the_prompt_opened_one() -> None:
    """The same past turn after a generation prompt that opens no block is read as text."""
    source = (
        "{% for m in messages %}<|{{ m.role }}|>{% if m.tool_calls %}</think>"
        "{% for c in m.tool_calls %}<tool_call>{{ c.function.name }}"
        "{% for k, v in c.function.arguments.items() %}<arg_key>{{ k }}</arg_key>"
        "<arg_value>{{ v }}</arg_value>{% endfor %}</tool_call>{% endfor %}"
        "{% else %}{{ m.content }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{{ opener }}{% endif %}"
    )
    opened = ChatTemplate(source, variables={"opener": "<think>"})
    plain = ChatTemplate(source, variables={"opener": ""})
    turn = _turn((PROBE_CALL,), "", False)
    assert assistant_text(opened, [USER], turn, PROBE_TOOLS)[1] is True
    assert assistant_text(plain, [USER], turn, PROBE_TOOLS)[1] is False
    assert detect_format(opened).format == "glm"


# ------------------------------------------------------------------ the end of a turn, learned


def test_minimax_m1_ends_its_turns_with_a_token_no_list_names() -> None:
    tpl = unseen("vllm-tool_chat_template_minimax_m1.jinja")
    assert "<end_of_sentence>" not in COMMON_END_TOKENS
    last, followed = plain_turns([USER])
    probe = with_sentinels(tpl)
    end = learned_end(
        probe.render(last, PROBE_TOOLS, add_generation_prompt=False),
        probe.render(followed, PROBE_TOOLS, add_generation_prompt=False),
    )
    assert end == "<end_of_sentence>"
    found = detect_format(tpl)
    assert (found.format, found.via) == ("minimax-m1", "probe")
    assert found.call_text.endswith("</tool_calls>")


#: ChatML with an end-of-turn token of its own, and Hermes calls.
INVENTED_END = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.tool_calls %}"
    "{% for c in m.tool_calls %}<tool_call>\n{{ {'name': c.function.name, 'arguments': "
    "c.function.arguments} | tojson }}\n</tool_call>{% endfor %}{% else %}{{ m.content }}"
    "{% endif %}<|fin|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% endif %}"
)


def test_an_invented_end_token_is_learned(monkeypatch: pytest.MonkeyPatch) -> None:
    tpl = ChatTemplate(INVENTED_END, eos_token="", bos_token="")
    found = detect_format(tpl)
    assert (found.format, found.call_text) == (
        "hermes",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n'
        "</tool_call>",
    )
    # the learning does it: without it, the turn's text runs on past the calls, Hermes does
    # not read it (only a grammar learned with <|fin|> as its closing would)
    monkeypatch.setattr(turn_module, "learned_end", lambda _a, _b: "")
    again = detect_format(ChatTemplate(INVENTED_END + " "), families=[get_family("hermes")])
    assert again.format != "hermes" and "<|fin|>" in again.call_text


@pytest.mark.parametrize(
    ("after_last", "after_next", "end"),
    [
        ("<|im_end|>\n", "<|im_end|>\n<|im_start|>user\nAnd tomorrow?", "<|im_end|>"),
        ("<|eot_id|>", "<|eot_id|><|start_header_id|>user", "<|eot_id|>"),
        ("<turn|>\n", "<turn|>\n<|turn>user", "<turn|>"),
        ("", "\n\nUser: And tomorrow?", ""),  # a turn ended only by the next one
        ("<|user|>", "<|assistant|>", ""),  # "<|" shared by two headers is no end
        ("Thanks", "Thanks\nUser:", ""),  # a word is no token
    ],
)
def test_learned_end(after_last: str, after_next: str, end: str) -> None:
    reply = turn_module.PLAIN_REPLY
    assert learned_end(f"head {reply}{after_last}", f"head {reply}{after_next}") == end


def test_the_learned_end_is_found_only_after_the_calls() -> None:
    """Kimi K3 closes its response channel (what follows a plain reply) before the calls;
    GigaChat writes its end of message before the calls' own message: neither cuts a call."""
    for name, family in (("Kimi-K3.jinja", "kimi-k3"), ("GigaChat3-10B-A1.8B.jinja", "gigachat")):
        tpl = load_template(CORPUS / name)
        text, opened = assistant_text(tpl, [USER], _turn((PROBE_CALL,), "", False), PROBE_TOOLS)
        assert get_family(family).parse(text, PROBE_TOOLS, reasoning_open=opened).calls


# ------------------------------------------------------------------ the start of the turn


def test_mistral_parallel_is_found_from_a_plain_turn() -> None:
    """vLLM's Mistral-parallel template writes its system prompt into the last user message
    only when nothing follows it: the generation prompt's diff starts inside the user's words,
    so the start is taken from a rendering with a plain assistant turn."""
    tpl = unseen("vllm-tool_chat_template_mistral_parallel.jinja")
    turn = _turn((PROBE_CALL,), "", False)
    prompt_text, _ = assistant_text(tpl, [USER], turn, PROBE_TOOLS, start="prompt")
    assert USER["content"] in prompt_text
    text, _ = assistant_text(tpl, [USER], turn, PROBE_TOOLS)
    assert text.startswith('[TOOL_CALLS] [{"name": "get_weather"')
    found = detect_format(tpl)
    assert (found.format, found.start) == ("mistral", "turn")


def test_deepseek_v31_as_sglang_publishes_it_is_found_from_a_plain_turn() -> None:
    """SGLang's DeepSeek V3.1 example writes a past call's turn header with other whitespace
    than its generation prompt, and ``</think>`` joined to it: the generation prompt's diff
    starts before the header, the plain turn's at the calls."""
    tpl = unseen("sglang-tool_chat_template_deepseekv31.jinja")
    turn = _turn((PROBE_CALL,), "", False)
    prompt_text, _ = assistant_text(tpl, [USER], turn, PROBE_TOOLS, start="prompt")
    assert "<｜Assistant｜>" in prompt_text
    assert get_family("deepseek-v3.1").parse(prompt_text, PROBE_TOOLS).content.strip() != ""
    found = detect_format(tpl)
    assert (found.format, found.via, found.start) == ("deepseek-v3.1", "probe", "turn")
    assert found.call_text.strip().startswith("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>")


def test_deepseek_v31_as_vllm_publishes_it_does_not_compile() -> None:
    found = detect_format(unseen("vllm-tool_chat_template_deepseekv31.jinja"))
    assert found.format == "none" and "syntax error" in found.errors[0]


def test_deepseek_v31_with_its_two_typos_fixed_is_found_from_a_plain_turn() -> None:
    """vLLM's DeepSeek V3.1 example has two syntax errors (``tojson}`` for ``tojson %}``, and
    an unescaped ``'`` in ``tool's``); with only those fixed, it writes the past turn's header
    with other whitespace and ``</think>`` joined to it, so the generation prompt's diff
    starts before the header and only the plain turn's finds the call."""
    source = (UNSEEN / "vllm-tool_chat_template_deepseekv31.jinja").read_text(encoding="utf-8")
    fixed = source.replace("tool | tojson}", "tool | tojson %}").replace(
        "the tool's Parameters", "the tool\\'s Parameters"
    )
    assert len(fixed) == len(source) + 3
    tpl = ChatTemplate(fixed)
    turn = _turn((PROBE_CALL,), "", False)
    prompt_text, _ = assistant_text(tpl, [USER], turn, PROBE_TOOLS, start="prompt")
    assert "<｜Assistant｜>" in prompt_text
    found = detect_format(tpl)
    assert (found.format, found.via, found.start) == ("deepseek-v3.1", "probe", "turn")
    assert found.call_text.strip().startswith("<｜tool▁calls▁begin｜>")


# ------------------------------------------------------------------ what a prompt or values teach


@pytest.mark.parametrize(
    "name",
    [
        "vllm-tool_chat_template_llama3.2_pythonic.jinja",
        "sglang-tool_chat_template_llama4_pythonic.jinja",  # and no brackets
        "vllm-tool_chat_template_gemma3_pythonic.jinja",  # no comma between values
    ],
)
def test_python_values_as_templates_write_them_are_read(name: str) -> None:
    """``get_weather(city=Paris)``, ``city="Paris"days=3``: the template's own two calls are
    read back, each named ``recovered-python-values``, whole and in chunks; strict reads them
    as no call, and says so."""
    tpl = unseen(name)
    two, opened = _probe_text(tpl, DERIVE_CALLS)
    assert "city=Paris" in two or 'city="Paris"days=3' in two
    pythonic = get_family("pythonic")
    assert detect_module._reads(pythonic, two, opened, DERIVE_CALLS)
    for size in (1, 2, 3, 7, len(two)):
        stream = pythonic.stream(DERIVE_TOOLS)
        events = [e for k in range(0, len(two), size) for e in stream.feed(two[k : k + size])]
        events += stream.finish()
        done = assemble(events)
        assert [(c.name, typed(c, DERIVE_TOOLS)) for c in done.calls] == [
            (c.name, c.arguments) for c in DERIVE_CALLS
        ]
        codes = [e.code for e in events if isinstance(e, Notice)]
        assert codes.count("recovered-python-values") == 2, codes
        assert done.content == ""
    refused = pythonic.parse(two, DERIVE_TOOLS, strict=True)
    # (the message's end token where the reply ends is where it stopped, not text)
    assert not refused.calls and refused.content == two.removesuffix("<|eom|>")
    assert detect_format(tpl).format == "pythonic"


_CHAT = (
    "{% for m in messages %}<|{{ m.role }}|>{% if m.tool_calls %}"
    "{% for c in m.tool_calls %}{{ c.function.name }}({% for k, v in "
    "c.function.arguments.items() %}{{ k }}={{ v }}{% if not loop.last %}, {% endif %}"
    "{% endfor %}){% endfor %}{% else %}{{ m.content }}{% endif %}"
    "<|end|>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_a_prompt_claims_nothing_for_a_template_that_renders_calls_otherwise() -> None:
    """The prompt states Granite's ``<|tool_call|>``, but the history writes calls in a
    grammar nobody reads: what the model is trained on contradicts the words, so no claim."""
    words = "{% if tools %}<|system|>Call tools as <|tool_call|>[...]<|end|>{% endif %}"
    found = detect_format(ChatTemplate(words + _CHAT, eos_token="<|end|>"))
    assert found.format == "none"
    hides = _CHAT.replace("{% if m.tool_calls %}", "{% if false %}")
    found = detect_format(ChatTemplate(words + hides, eos_token="<|end|>"))
    assert (found.format, found.via) == ("granite", "prompt")


def test_a_quoted_python_boolean_is_typed_by_the_schema() -> None:
    """vLLM's Llama 4 pythonic template quotes every value (``loud="False"``): the schema
    says boolean, so it is false — a named repair, which strict refuses."""
    tpl = unseen("vllm-tool_chat_template_llama4_pythonic.jinja")
    call = ToolCall("a1b2c3d4e", "set_alarm", {"time": "07:30", "loud": False})
    text, _ = assistant_text(tpl, [USER], _turn((call,), "", False), DERIVE_TOOLS)
    assert text == '[set_alarm(time="07:30", loud="False")]'
    (read,) = get_family("pythonic").parse(text, DERIVE_TOOLS).calls
    schema = DERIVE_TOOLS[1]["function"]["parameters"]
    done = prepare_arguments(read.arguments_text or read.arguments, schema)
    assert done.arguments == {"time": "07:30", "loud": False}
    assert done.repairs == ("boolean-from-string",)
    with pytest.raises(ArgumentsError):
        prepare_arguments(read.arguments_text or read.arguments, schema, strict=True)


# ------------------------------------------------------------------ bounds


def test_detection_renders_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """However a template answers, one detection makes a fixed number of attempts: renders
    are counted (the time and memory of each are the TemplateBudget's), and a second
    detection of the same template renders nothing (cached)."""
    count = [0]
    render = ChatTemplate.render

    def counting(self: ChatTemplate, *args: Any, **kwargs: Any) -> str:
        count[0] += 1
        return render(self, *args, **kwargs)

    monkeypatch.setattr(ChatTemplate, "render", counting)
    most = 0
    for path in EVERY_TEMPLATE:
        count[0] = 0
        source = path.read_text(encoding="utf-8") + "{# counted #}"  # not yet cached
        detect_format(ChatTemplate(source, name=path.name))
        most = max(most, count[0])
        count[0] = 0
        detect_format(ChatTemplate(source, name=path.name))
        assert count[0] == 0
    # 8 probe attempts (each a few renders, and a proof for each family that reads the probe
    # call: a refuted one costs its proof again on the next attempt), 4 derivations, the
    # prompt's claim: a template a family reads but never proves (vLLM's Hermes 2 Pro
    # example) takes the most; the time and memory of them all are one budget's
    assert 0 < most <= 96


def test_a_spent_budget_stops_detection_and_is_not_cached() -> None:
    """The plain turns and the proofs render inside the one budget too: spent, detection
    stops with the refusals, and the next detection, with a fresh budget, finds the family."""
    source = (UNSEEN / "vllm-tool_chat_template_minimax_m1.jinja").read_text(encoding="utf-8")
    tpl = ChatTemplate(source + "{# budget #}")
    cut = detect_format(tpl, budget=TemplateBudget(seconds=0.0))
    assert cut.format == "none" and cut.errors
    assert detect_format(tpl).format == "minimax-m1"
