"""GGUF metadata: small files written here with gguf.GGUFWriter, and the two real models."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

from toolwire.errors import GGUFError
from toolwire.templates import GGUFInfo, load_template, read_gguf

TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOOL_TEMPLATE = "TOOLS {{ tools | map(attribute='function.name') | join(',') }}"
TOKENS = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<|eom|>", "hello", "wörld"]

Writer = Callable[[GGUFWriter], None]


def full(writer: GGUFWriter) -> None:
    writer.add_name("Tiny Test Model")
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(TOKENS)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_eot_token_id(4)
    writer.add_eom_token_id(5)
    writer.add_add_bos_token(False)
    writer.add_chat_template(
        [{"name": "default", "template": TEMPLATE}, {"name": "tool_use", "template": TOOL_TEMPLATE}]
    )


def write_gguf(path: Path, fill: Writer = full) -> Path:
    writer = GGUFWriter(path, "llama")
    fill(writer)
    writer.add_tensor("token_embd.weight", np.arange(32, dtype=np.float32).reshape(4, 8))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "tiny.gguf")


def test_reads_templates_and_special_tokens(tiny: Path) -> None:
    info = read_gguf(tiny)
    assert info == GGUFInfo(
        path=tiny,
        name="Tiny Test Model",
        architecture="llama",
        chat_template=TEMPLATE,
        templates={"tool_use": TOOL_TEMPLATE},
        bos_token="<s>",
        eos_token="</s>",
        end_tokens=("</s>", "<|im_end|>", "<|eom|>"),
        add_bos=False,
    )


def test_template_renders_with_tool_use_variant_for_tools(tiny: Path) -> None:
    template = read_gguf(tiny).template()
    assert template.name == "Tiny Test Model"
    assert template.end_tokens == ("</s>", "<|im_end|>", "<|eom|>")
    prompt = template.render([{"role": "user", "content": "hi"}])
    assert prompt == "<s><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    tools = [{"name": "get_weather"}, {"name": "get_time"}]
    assert (
        template.render([{"role": "user", "content": "hi"}], tools) == "TOOLS get_weather,get_time"
    )


def test_load_template_by_extension_and_by_magic(tiny: Path) -> None:
    assert load_template(tiny).source == TEMPLATE
    renamed = tiny.rename(tiny.with_suffix(".bin"))
    assert load_template(renamed).tool_source == TOOL_TEMPLATE


def test_file_without_template_or_tokens(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "bare.gguf", lambda w: w.add_tokenizer_model("llama"))
    info = read_gguf(path)
    assert info.chat_template is None
    assert (info.bos_token, info.eos_token, info.end_tokens) == ("", "", ())
    assert info.name == ""
    assert info.add_bos is True  # llama.cpp's default for a SentencePiece vocabulary
    with pytest.raises(GGUFError, match="no chat template"):
        info.template()


@pytest.mark.parametrize(
    ("fill", "message"),
    [
        (lambda w: w.add_uint32("tokenizer.chat_template", 7), "expected a string"),
        (lambda w: w.add_string("tokenizer.ggml.bos_token_id", "1"), "expected an integer"),
        (lambda w: w.add_string("tokenizer.ggml.add_bos_token", "yes"), "expected a boolean"),
        (lambda w: w.add_string("tokenizer.chat_templates", "tool_use"), "array of strings"),
        (
            lambda w: (w.add_token_list(TOKENS), w.add_eos_token_id(99)),
            "outside the vocabulary",
        ),
        (lambda w: w.add_eos_token_id(2), "tokenizer.ggml.tokens is missing"),
    ],
)
def test_wrong_metadata_is_a_gguf_error(tmp_path: Path, fill: Writer, message: str) -> None:
    path = write_gguf(tmp_path / "bad.gguf", fill)
    with pytest.raises(GGUFError, match=message):
        read_gguf(path)


def test_truncated_files_are_gguf_errors(tiny: Path, tmp_path: Path) -> None:
    data = tiny.read_bytes()
    header_end = data.index(b"token_embd.weight") + 40  # past the last metadata field
    cut = tmp_path / "cut.gguf"
    for size in [*range(0, header_end, 7), len(data) - 1]:
        cut.write_bytes(data[:size])
        with pytest.raises(GGUFError):
            read_gguf(cut)


def test_missing_and_non_gguf_files(tmp_path: Path) -> None:
    with pytest.raises(GGUFError, match="cannot open"):
        read_gguf(tmp_path / "missing.gguf")
    with pytest.raises(GGUFError, match="cannot open"):
        read_gguf(tmp_path)
    text = tmp_path / "model.gguf"
    text.write_text("{{ messages }}")
    with pytest.raises(GGUFError, match="not a GGUF file"):
        read_gguf(text)
    with pytest.raises(GGUFError, match="not a GGUF file"):
        load_template(text)


# --- the real models ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen_info(qwen_gguf: Path) -> GGUFInfo:
    return read_gguf(qwen_gguf)  # about 7 s: GGUFReader parses the 151k-token vocabulary


def test_qwen_has_the_qwen25_tool_template(qwen_info: GGUFInfo) -> None:
    assert qwen_info.architecture == "qwen2"
    assert qwen_info.chat_template is not None
    assert "<tool_call>" in qwen_info.chat_template
    assert (qwen_info.bos_token, qwen_info.eos_token) == ("<|endoftext|>", "<|im_end|>")
    assert qwen_info.end_tokens == ("<|im_end|>",)
    assert qwen_info.add_bos is False
    tools = [{"name": "get_weather", "parameters": {"type": "object", "properties": {}}}]
    prompt = qwen_info.template().render([{"role": "user", "content": "Paris?"}], tools)
    assert '"name": "get_weather"' in prompt
    assert "<tool_call>" in prompt
    assert prompt.endswith("<|im_start|>user\nParis?<|im_end|>\n<|im_start|>assistant\n")


def test_smollm2_has_plain_chatml_without_tools(smollm2_gguf: Path) -> None:
    info = read_gguf(smollm2_gguf)
    assert info.architecture == "llama"
    assert info.chat_template is not None
    assert "tools" not in info.chat_template
    assert info.templates == {}
    assert info.eos_token == "<|im_end|>"
    prompt = info.template().render([{"role": "user", "content": "Hello"}])
    assert prompt.endswith("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n")
