"""The almost-JSON reader: each named repair, what it must not touch, and abuse."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.arguments import MAX_ARGUMENT_CHARS, read_json
from toolwire.arguments.read import ReadError
from toolwire.errors import ArgumentsError

REPAIRS: list[tuple[str, Any, tuple[str, ...]]] = [
    ('{"a": 1,}', {"a": 1}, ("trailing-comma",)),
    ('{"a": [1, 2,],}', {"a": [1, 2]}, ("trailing-comma",)),
    ("{'a': 'b'}", {"a": "b"}, ("single-quotes",)),
    ("{'it\\'s': \"x\"}", {"it's": "x"}, ("single-quotes",)),
    ('{a: 1, b_2: "x", $c: null}', {"a": 1, "b_2": "x", "$c": None}, ("bare-keys",)),
    (
        '{"a": True, "b": False, "c": None}',
        {"a": True, "b": False, "c": None},
        ("python-literals",),
    ),
    ('{"a": 1 // one\n, /* two */ "b": 2 # three\n}', {"a": 1, "b": 2}, ("comments",)),
    ('```json\n{"a": 1}\n```', {"a": 1}, ("code-fence",)),
    ('  ```\n{"a": 1}\n```  \n', {"a": 1}, ("code-fence",)),
    ('{"a": {"b": [1, 2', {"a": {"b": [1, 2]}}, ("unclosed-brackets",)),
    ('{"a": "tex', {"a": "tex"}, ("unclosed-string", "unclosed-brackets")),
    ('{"a": "line\nbreak\tand tab"}', {"a": "line\nbreak\tand tab"}, ("control-characters",)),
    ('{"p": "C:\\Users\\me"}', {"p": "C:\\Users\\me"}, ("invalid-escape",)),
    ('{"a": 1}{"b": 2}', {"a": 1, "b": 2}, ("joined-objects",)),
    ('{"a": 1}\n{"b": 2},{"c": 3}', {"a": 1, "b": 2, "c": 3}, ("joined-objects",)),
    ('{"city": "Paris"}{"city": "Rome"}', {"city": "Paris"}, ("extra-objects",)),
]


@pytest.mark.parametrize(("text", "value", "repairs"), REPAIRS)
def test_each_repair_is_named(text: str, value: Any, repairs: tuple[str, ...]) -> None:
    result = read_json(text)
    assert result.value == value
    assert result.repairs == repairs


@pytest.mark.parametrize(("text", "value", "repairs"), REPAIRS)
def test_strict_turns_each_repair_into_an_error(
    text: str, value: Any, repairs: tuple[str, ...]
) -> None:
    with pytest.raises(ReadError, match="not strict JSON") as info:
        read_json(text, strict=True)
    assert info.value.line >= 1 and info.value.column >= 1
    assert repairs[0] in info.value.what


@pytest.mark.parametrize(
    "text",
    [
        "I think {this} is fine",
        'Sure! {"a": 1}',
        '{"a": 1} and that is all',
        "{a b}",
        '{"a": yes}',
        '{"a": NaN}',
        '{"a": Infinity}',
        '{"a": 0x10}',
        '{"a": 01}',
        '{"a": .5}',
        '{"a": 1e999}',
        "",
        "   ",
        '{"a" 1}',
        '{"a": 1 "b": 2}',
        "{,}",
        '{"a": }',
        '{"a": ',
        "```\n```",
        "{'a': os.system('x')}",
    ],
)
def test_what_is_not_almost_json_is_refused(text: str) -> None:
    with pytest.raises(ReadError):
        read_json(text)


def test_refusals_say_where() -> None:
    with pytest.raises(ReadError) as info:
        read_json('{\n  "a": 1,\n  "b": yes\n}')
    assert (info.value.line, info.value.column) == (3, 8)
    assert "yes" in str(info.value)


def test_text_inside_strings_is_never_touched() -> None:
    text = '{"a": "3 items, True, None, // not a comment, {\'x\': 1,}"}'
    assert read_json(text).value == {"a": "3 items, True, None, // not a comment, {'x': 1,}"}
    assert read_json(text).repairs == ()


def test_dangerous_keys_are_plain_keys() -> None:
    result = read_json("{__proto__: 1, '__class__': {\"__init__\": 2}, constructor: 3}")
    assert result.value == {"__proto__": 1, "__class__": {"__init__": 2}, "constructor": 3}
    assert type(result.value) is dict


def test_a_json_string_is_read_as_a_string() -> None:
    assert read_json('"{\\"a\\": 1}"').value == '{"a": 1}'


class TestAbuse:
    @pytest.mark.parametrize("opener", ["[", '{"a": '])
    def test_nesting_100000_deep(self, opener: str) -> None:
        closer = "]" if opener == "[" else "}"
        for text in (opener * 100_000, opener * 100_000 + "1" + closer * 100_000):
            with pytest.raises(ReadError) as info:
                read_json(text)
            assert info.value.kind == "limit"

    def test_nesting_at_the_limit_reads(self) -> None:
        assert read_json("[" * 100 + "]" * 100).repairs == ()
        with pytest.raises(ReadError):
            read_json("[" * 101 + "]" * 101)
        with pytest.raises(ReadError):
            read_json("[" * 101)  # through the repairing reader too

    def test_10_mb(self) -> None:
        big = '{"a": "' + "x" * 10_000_000 + '"}'
        with pytest.raises(ReadError) as info:
            read_json(big)
        assert info.value.kind == "limit"
        body = "x" * (MAX_ARGUMENT_CHARS - 20)
        result = read_json('{"a": "' + body)  # unclosed: through the repairing reader
        assert result.value == {"a": body}
        assert result.repairs == ("unclosed-string", "unclosed-brackets")

    def test_unclosed_strings_at_every_position(self) -> None:
        text = '{"path": "src/a.py", "content": "line 1\\nline \\"2\\"\\n", "n": [1, "x"]}'
        whole = json.loads(text)
        for cut in range(len(text)):
            try:
                result = read_json(text[:cut])
            except ReadError:
                continue
            assert isinstance(result.value, dict)
            # whatever was read is a prefix of the truth: no value is invented
            for key, value in result.value.items():
                assert key in whole
                if isinstance(value, str):
                    assert str(whole[key]).startswith(value)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values, indent=st.sampled_from([None, 2]))
def test_valid_json_passes_through_unchanged(value: Any, indent: int | None) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    result = read_json(text)
    assert result.value == value and result.repairs == ()
    assert read_json(text, strict=True).value == value


@settings(max_examples=500, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list("{}[]\"',:/*#\\ \n\t-0123456789.eEtrueflsnoTFNabc`u")),
        max_size=60,
    )
)
def test_only_the_documented_error(text: str) -> None:
    with contextlib.suppress(ArgumentsError):
        read_json(text)
