"""Hostile GGUF metadata is refused (or read) in bounded time and memory, by both readers
(the template's, ``read_gguf``, and the default context's, ``model_shape``); the real models
read as the ``gguf`` package reads them.

The hostile files are written here byte by byte (the ``gguf`` package's writer cannot write a
header that lies about its counts). Memory is measured with ``tracemalloc``; work is counted,
not timed (a busy machine stretches a time; see :mod:`tests.work_count`): the calls a read
makes, few for a refusal from a claim, and growing with the metadata, never faster.
"""

from __future__ import annotations

import io
import struct
import tracemalloc
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from toolwire.backends.context import model_shape
from toolwire.errors import GGUFError
from toolwire.templates import read_gguf
from toolwire.templates.gguf_meta import GGUFLimits, read_metadata

from .work_count import calls_made

UINT8, UINT32, STRING, ARRAY = 0, 4, 8, 9
#: The most a read of hostile metadata may hold at once.
PEAK = 64 << 20
#: The most calls a read refused from its header's claims may make (some 300 here): walking
#: what a claim says would take millions.
REFUSED_CALLS = 2_000


def text(value: str | bytes) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return struct.pack("<Q", len(raw)) + raw


def pair(key: str, kind: int, payload: bytes) -> bytes:
    return text(key) + struct.pack("<I", kind) + payload


def gguf(pairs: Iterable[bytes], count: int | None = None) -> bytes:
    body = list(pairs)
    claimed = len(body) if count is None else count
    return b"GGUF" + struct.pack("<IQQ", 3, 0, claimed) + b"".join(body)


def string_array(items: Iterable[bytes], count: int) -> bytes:
    return struct.pack("<IQ", STRING, count) + b"".join(items)


def base(template: str = "{{ messages }}") -> list[bytes]:
    return [
        pair("general.architecture", STRING, text("llama")),
        pair("llama.context_length", UINT32, struct.pack("<I", 8192)),
        pair("tokenizer.chat_template", STRING, text(template)),
    ]


def measured(read: Callable[[], Any]) -> tuple[Any, int, int]:
    """What ``read`` returns (or the GGUFError it raises), its peak of allocated bytes and the
    function calls it made."""

    def result() -> Any:
        try:
            return read()
        except GGUFError as exc:
            return exc

    tracemalloc.start()
    try:
        found, calls = calls_made(result)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return found, peak, calls


def both(path: Path) -> list[tuple[Any, int, int]]:
    return [measured(lambda: read_gguf(path)), measured(lambda: model_shape(path))]


# --- lies in the header ---------------------------------------------------------------------


def test_a_header_claiming_2_40_pairs_is_refused_before_any_is_read(tmp_path: Path) -> None:
    path = tmp_path / "pairs.gguf"
    path.write_bytes(gguf(base(), count=1 << 40))
    for result, peak, _ in both(path):
        assert isinstance(result, GGUFError)
        assert "metadata pairs is 1099511627776, past the bound of 65536" in str(result)
        assert peak < 1 << 20


@pytest.mark.parametrize("key", ["tokenizer.chat_template", "general.name", "some.other.key"])
def test_a_string_claiming_2_62_bytes_is_refused(tmp_path: Path, key: str) -> None:
    path = tmp_path / "string.gguf"
    path.write_bytes(gguf([*base(), pair(key, STRING, struct.pack("<Q", 1 << 62) + b"x" * 64)]))
    result, peak, _ = measured(lambda: read_gguf(path))
    assert isinstance(result, GGUFError)
    assert key in str(result) or "cut short" in str(result)
    assert str(path) in str(result)
    assert peak < 1 << 20


def test_a_template_past_its_bound_names_the_key_and_the_bound(tmp_path: Path) -> None:
    meta = gguf(base("x" * 5000))
    with pytest.raises(
        GGUFError, match=r"tokenizer\.chat_template is 5000, past the bound of 4096"
    ):
        read_metadata(io.BytesIO(meta), lambda key: True, limits=GGUFLimits(template=4096))
    # within the bound, the same file reads
    found = read_metadata(io.BytesIO(meta), lambda key: True, limits=GGUFLimits(template=5000))
    assert found.values["tokenizer.chat_template"] == "x" * 5000


@pytest.mark.parametrize("item", [UINT8, STRING, ARRAY])
def test_an_array_of_10_9_items_is_refused(tmp_path: Path, item: int) -> None:
    path = tmp_path / "array.gguf"
    hostile = pair("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", item, 10**9) + bytes(4096))
    path.write_bytes(gguf([*base(), hostile]))
    for result, peak, calls in both(path):
        assert isinstance(result, GGUFError)
        assert "item count of tokenizer.ggml.tokens is 1000000000" in str(result)
        assert peak < 1 << 20
        assert calls < REFUSED_CALLS, calls  # refused from the claim, nothing walked


def test_an_array_claiming_more_than_the_file_holds_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "short.gguf"
    hostile = pair("tokenizer.ggml.merges", ARRAY, struct.pack("<IQ", STRING, 900_000))
    path.write_bytes(gguf([*base(), hostile]))  # 900,000 strings need 7.2 MB; none follow
    for result, peak, _ in both(path):
        assert isinstance(result, GGUFError)
        assert "tokenizer.ggml.merges runs past the end of the file" in str(result)
        assert peak < 1 << 20


def test_arrays_nested_a_million_deep_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "nested.gguf"
    nest = struct.pack("<IQ", ARRAY, 1) * 10**6 + struct.pack("<IQ", UINT8, 0)
    path.write_bytes(gguf([*base(), pair("some.nested", ARRAY, nest)]))
    for result, peak, calls in both(path):
        assert isinstance(result, GGUFError)
        assert "the nesting of arrays in some.nested is 5, past the bound of 4" in str(result)
        assert peak < 1 << 20
        assert calls < REFUSED_CALLS, calls  # the million levels are never walked


def test_more_pairs_than_the_bound_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "many.gguf"
    extra = (pair(f"k.{i}", UINT8, b"\0") for i in range(70_000))
    path.write_bytes(gguf([*base(), *extra]))
    for result, _, _ in both(path):
        assert isinstance(result, GGUFError)
        assert "past the bound of 65536" in str(result)


def test_metadata_past_its_total_bound_is_refused() -> None:
    filler = [pair(f"k.{i}", STRING, text("v" * 1000)) for i in range(2000)]  # 2 MB
    with pytest.raises(GGUFError, match=r"metadata passes 1048576 bytes at k\.\d+"):
        read_metadata(io.BytesIO(gguf([*base(), *filler])), lambda key: False,
                      limits=GGUFLimits(total=1 << 20))  # fmt: skip


# --- large but honest files: read in linear time and bounded memory -------------------------


def many_small_strings(size: int) -> bytes:
    """``size`` bytes of metadata in 250-byte string pairs (within the bound on pairs)."""
    count = size // 280
    return gguf([*base(), *(pair(f"x.{i:07d}", STRING, text("s" * 250)) for i in range(count))])


def vocabulary(tokens: int) -> bytes:
    """A header like a real model's: a vocabulary of ``tokens`` strings, then the ids."""
    items = (text(f"tok{i}") for i in range(tokens))
    return gguf(
        [
            *base(),
            pair("tokenizer.ggml.tokens", ARRAY, string_array(items, tokens)),
            pair("tokenizer.ggml.eos_token_id", UINT32, struct.pack("<I", tokens - 1)),
            pair("tokenizer.ggml.bos_token_id", UINT32, struct.pack("<I", 3)),
        ]
    )


def test_a_16_mb_file_of_small_strings_reads_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "small.gguf"
    path.write_bytes(many_small_strings(16 << 20))
    assert path.stat().st_size > 15 << 20
    (info, peak, _), (shape, shape_peak, _) = both(path)
    assert not isinstance(info, GGUFError), info
    assert info.chat_template == "{{ messages }}"
    assert shape.trained == 8192
    assert peak < PEAK
    assert shape_peak < PEAK


@pytest.mark.parametrize("make", [many_small_strings, lambda n: vocabulary(n // 16)])
def test_twice_the_metadata_takes_at_most_about_twice_the_work(
    tmp_path: Path, make: Callable[[int], bytes]
) -> None:
    counts = []
    for size in (4 << 20, 8 << 20):
        path = tmp_path / f"m{size}.gguf"
        path.write_bytes(make(size))
        _, calls = calls_made(partial(read_gguf, path))
        counts.append(calls)
    assert counts[1] < 2.5 * counts[0], counts  # linear: twice; quadratic: four times


def test_the_vocabulary_is_walked_not_built(tmp_path: Path) -> None:
    path = tmp_path / "vocab.gguf"
    path.write_bytes(vocabulary(300_000))  # twice a real vocabulary
    info, peak, _ = measured(lambda: read_gguf(path))
    assert not isinstance(info, GGUFError), info
    assert (info.bos_token, info.eos_token) == ("tok3", "tok299999")
    assert peak < 4 << 20  # 300,000 strings built would be some 20 MB


def test_an_id_outside_the_vocabulary_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "outside.gguf"
    tokens = pair("tokenizer.ggml.tokens", ARRAY, string_array([text("a"), text("b")], 2))
    eos = pair("tokenizer.ggml.eos_token_id", UINT32, struct.pack("<I", 1 << 31))
    path.write_bytes(gguf([*base(), tokens, eos]))
    with pytest.raises(GGUFError, match=r"token id 2147483648 is outside the vocabulary \(2"):
        read_gguf(path)


# --- the real models read as the gguf package reads them ------------------------------------


def reference(path: Path) -> dict[str, Any]:
    """What the ``gguf`` package's reader finds in ``path``: the fields read_gguf returns,
    and how many strings its arrays hold (``strings``: what a reader walks)."""
    gguf_package = pytest.importorskip("gguf")
    reader = gguf_package.GGUFReader(path)
    fields = reader.fields

    def value(key: str) -> Any:
        found = fields.get(key)
        if found is None:
            return None
        if found.types[0] == gguf_package.GGUFValueType.STRING:
            return bytes(found.parts[-1]).decode()
        return found.parts[-1][0]

    tokens = fields["tokenizer.ggml.tokens"]

    def token(key: str) -> str:
        index = value(key)
        return "" if index is None else bytes(tokens.parts[tokens.data[int(index)]]).decode()

    arch = value("general.architecture")
    strings = sum(
        len(found.data)
        for found in fields.values()
        if found.types[:2] == [gguf_package.GGUFValueType.ARRAY, gguf_package.GGUFValueType.STRING]
    )
    return {
        "strings": strings,
        "architecture": arch,
        "name": value("general.name") or "",
        "chat_template": value("tokenizer.chat_template"),
        "templates": {
            key.removeprefix("tokenizer.chat_template."): value(key)
            for key in fields
            if key.startswith("tokenizer.chat_template.")
        },
        "bos": token("tokenizer.ggml.bos_token_id"),
        "eos": token("tokenizer.ggml.eos_token_id"),
        "context_length": int(value(f"{arch}.context_length")),
    }


@pytest.mark.parametrize("model", ["qwen_gguf", "smollm2_gguf"])
def test_the_real_models_read_as_the_gguf_package_reads_them(
    model: str, request: pytest.FixtureRequest
) -> None:
    path: Path = request.getfixturevalue(model)
    (info, peak, calls), (shape, _, _) = both(path)
    assert not isinstance(info, GGUFError), info
    expected = reference(path)
    assert info.architecture == expected["architecture"]
    assert info.name == expected["name"]
    assert info.chat_template == expected["chat_template"]
    assert info.templates == expected["templates"]
    assert (info.bos_token, info.eos_token) == (expected["bos"], expected["eos"])
    assert shape.trained == expected["context_length"]
    assert peak < 16 << 20  # the template and a few scalars; the vocabulary never built
    # each string of the vocabulary and the merges walked in two calls (its length read, the
    # buffer checked): the old reader, which built them all (7 s), made several more each
    assert calls < 3 * expected["strings"] + 10_000, (calls, expected["strings"])
