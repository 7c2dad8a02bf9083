"""BFCL's rules as the port keeps them, on small made-up functions (no data needed): string
normalisation, optional parameters and types, variables, what "nothing decoded" is, and the
conversion of BFCL's functions to OpenAI-style tools. Its run on BFCL's own data and against
BFCL's own checker is tests/test_bfcl_check.py."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.bench.bfcl_check import (
    GORILLA_TO_OPENAPI,
    PYTHON_HINT,
    Verdict,
    check,
    decode_openai_calls,
    is_empty_output,
    openai_tools,
    standardize_string,
    tool_name,
)


def _function(**props: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "geo.find",
        "description": "Find.",
        "parameters": {"type": "dict", "properties": props, "required": ["city"]},
    }


CITY = {"type": "string", "description": "A city."}


@pytest.mark.parametrize(
    ("given", "valid"),
    [
        ("San Francisco, CA", True),
        ("san francisco ca", True),
        ("SAN-FRANCISCO/CA.", True),
        ("San_Francisco*^CA", True),
        ("sanfranciscoca", True),
        ("San Fransisco, CA", False),
        ("San Francisco; CA", False),
    ],
)
def test_string_normalisation(given: str, valid: bool) -> None:
    truth = [{"geo.find": {"city": ["San Francisco, CA"]}}]
    verdict = check([_function(city=CITY)], [{"geo_find": {"city": given}}], truth, "simple")
    assert verdict.valid is valid
    assert verdict.error_type == ("" if valid else "value_error:string")
    assert standardize_string("It's") == standardize_string('it"s')


def test_optional_parameters_and_types() -> None:
    funcs = [
        _function(
            city=CITY,
            days={"type": "integer", "description": "d"},
            scale={"type": "float", "description": "s"},
            tags={"type": "array", "items": {"type": "string"}, "description": "t"},
            where={"type": "dict", "properties": {}, "description": "w"},
        )
    ]
    truth = [
        {
            "geo.find": {
                "city": ["Paris"],
                "days": [3, ""],
                "scale": [2.0],
                "tags": [["Old Town", "river"]],
                "where": [{"lat": [1.5], "note": ["", "x"]}],
            }
        }
    ]

    def judge(**args: Any) -> Verdict:
        full = {"city": "paris", "scale": 2, "tags": ["old town", "River"], "where": {"lat": 1.5}}
        full.update(args)
        return check(
            funcs,
            [{"geo_find": {k: v for k, v in full.items() if v is not None}}],
            truth,
            "simple_python",
        )

    assert judge().valid  # days omitted ("" allowed), int 2 for the float, lists normalised
    assert judge(days=3).valid
    assert judge(days=4).error_type == "value_error:others"
    assert judge(days=3.0).error_type == "type_error:simple"
    assert judge(scale=None).error_type == "simple_function_checker:missing_optional"
    assert judge(scale=True).error_type == "type_error:simple"
    assert judge(tags=["old town"]).error_type == "value_error:list/tuple"
    assert judge(tags=["old town", 5]).error_type == "type_error:nested"
    assert judge(where={"lat": 1.5, "note": "X"}).valid
    assert judge(where={"lat": 2.5}).error_type == "value_error:dict_value"
    assert judge(where={"lat": 1.5, "zone": 1}).error_type == "value_error:dict_key"
    assert judge(where={}).error_type == "value_error:dict_key"
    assert judge(city=None).error_type == "simple_function_checker:missing_required"
    verdict = check(funcs, [{"geo_find": {"city": "Paris"}}] * 2, truth, "simple_python")
    assert verdict.error_type == "simple_function_checker:wrong_count"


def test_variables() -> None:
    """A possible value of another type than declared is a "variable": BFCL then takes the
    value as it is, without the string normalisation or the dict and list checks."""
    funcs = [_function(city=CITY, days={"type": "integer", "description": "d"})]
    truth = [{"geo.find": {"city": [5], "days": ["n_days"]}}]

    def judge(city: Any, days: Any) -> Verdict:
        return check(funcs, [{"geo_find": {"city": city, "days": days}}], truth, "simple_python")

    assert judge(5, "n_days").valid
    assert judge("5", "n_days").error_type == "value_error:others"
    assert judge(5, "N_DAYS").error_type == "value_error:others"
    assert judge(5, 3).error_type == "value_error:others"
    assert judge(5, 3.0).error_type == "type_error:simple"


def test_what_nothing_decoded_is() -> None:
    funcs, truth = [_function(city=CITY)], [{"geo.find": {"city": ["Paris"]}}]
    assert decode_openai_calls([("geo_find", '{"city": "Paris"}')]) == [
        {"geo_find": {"city": "Paris"}}
    ]
    assert decode_openai_calls([("geo_find", '{"city": ')]) is None
    assert check(funcs, None, truth, "simple_python").error_type == "ast_decoder:decoder_failed"
    listed = decode_openai_calls([("geo_find", '["Paris"]')])
    verdict = check(funcs, listed, truth, "simple_python")
    assert verdict.error_type == "ast_decoder:decoder_wrong_output_format"
    assert is_empty_output(listed) and is_empty_output([]) and is_empty_output([{}])
    assert not is_empty_output([{"geo_find": {}}])


def test_the_tool_conversion() -> None:
    props = {
        "a": {
            "type": "dict",
            "description": "",
            "properties": {"x": {"type": "float", "description": "x"}},
        },
        "b": {"type": "float", "description": "b"},
        "c": {"type": "tuple", "items": {"type": "integer"}, "description": ""},
        "d": {"type": "any", "description": ""},
        "e": {"description": "no type"},
        "f": {"type": "array", "items": {"type": "dict", "properties": {"y": {"type": "tuple"}}}},
        "g": {"type": "array", "items": {"type": "array", "items": {"type": "float"}}},
        "h": {"type": "boolean", "description": "", "default": True},
    }
    function = {
        "name": "math.stats.mean",
        "description": "Mean.",
        "parameters": {"type": "dict", "properties": props, "required": ["b"]},
    }
    (tool,) = openai_tools([function])
    out = tool["function"]["parameters"]["properties"]
    assert tool["function"]["name"] == "math_stats_mean" == tool_name("math.stats.mean")
    assert tool["function"]["description"] == "Mean." + PYTHON_HINT
    assert {k: v["type"] for k, v in out.items()} == {
        "a": "object", "b": "number", "c": "array", "d": "string",
        "e": "string", "f": "array", "g": "array", "h": "boolean",
    }  # fmt: skip
    assert out["b"] == {"type": "number", "format": "float",
                        "description": "b This is a float type value."}  # fmt: skip
    assert out["a"]["properties"]["x"]["type"] == "number"
    assert out["c"]["items"] == {"type": "integer"}
    assert out["f"]["items"]["properties"]["y"]["type"] == "array"
    assert out["g"]["items"]["items"]["type"] == "number"
    assert out["h"]["default"] is True
    assert function["name"] == "math.stats.mean" and props["b"]["type"] == "float"
    assert openai_tools([function], hint=False)[0]["function"]["description"] == "Mean."
    assert GORILLA_TO_OPENAPI["dict"] == "object" and GORILLA_TO_OPENAPI["tuple"] == "array"
    truth = [{"math.stats.mean": {"b": [1.5]}}]
    assert check([function], [{"math_stats_mean": {"b": 1.5}}], truth, "simple_python").valid
    dotted = [{"math.stats.mean": {"b": 1.5}}]
    assert not check([function], dotted, truth, "simple_python").valid
    assert check([function], dotted, truth, "simple_python", underscore_to_dot=False).valid
