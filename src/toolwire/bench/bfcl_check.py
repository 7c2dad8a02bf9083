"""BFCL v4's AST checker for Python, ported, and the tools BFCL sends an OpenAI-style FC model.

A port of the Berkeley Function Calling Leaderboard's checker (the ``bfcl-eval`` wheel, version
2026.3.23, Apache-2.0, https://github.com/ShishirPatil/gorilla):
``bfcl_eval/eval_checker/ast_eval/ast_checker.py`` for the Python language, the relevance rules
of ``eval_checker/eval_runner.py`` (``_evaluate_single_relevance_entry``, ``is_empty_output``,
``is_function_calling_format_output``), the FC decoding of its OpenAI handlers, and the tool
conversion of ``model_handler/utils.py`` (``convert_to_tool``, ``_cast_to_openai_type``,
``GORILLA_TO_OPENAPI``, the Python hint of ``_func_doc_language_specific_pre_processing``).

Why a port rather than an import: ``bfcl_eval``'s modules pull in every provider's SDK (and
create directories on import), so toolwire reads only its data files. A score is comparable
with the leaderboard's only if it is judged as BFCL judges it, quirks included, so the control
flow and the messages follow the original line for line; the tests run both on BFCL's own data.

Pure: no I/O.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError

__all__ = [
    "GORILLA_TO_OPENAPI",
    "PYTHON_HINT",
    "Verdict",
    "check",
    "decode_openai_calls",
    "is_empty_output",
    "openai_tools",
    "standardize_string",
    "tool_name",
]

#: BFCL's ``PYTHON_TYPE_MAPPING``: a parameter's declared type to the Python type its value
#: must have ("any" is checked as a string, "tuple" as a list: JSON has no tuples).
_PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
#: Types whose items BFCL also checks (one level deep, as BFCL does).
_NESTED = ("array", "tuple")

#: BFCL's ``GORILLA_TO_OPENAPI``: its type names to JSON Schema's.
GORILLA_TO_OPENAPI: dict[str, str] = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "double": "number",
    "char": "string",
    "ArrayList": "array",
    "Array": "array",
    "HashMap": "object",
    "Hashtable": "object",
    "Queue": "array",
    "Stack": "array",
    "Any": "string",
    "String": "string",
    "Bigint": "integer",
}

#: What BFCL appends to every function's description for the Python categories.
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."


@dataclass(frozen=True)
class Verdict:
    """BFCL's judgement of one case: ``error_type`` and ``errors`` as its score files give them.

    A parallel mismatch's per-call details (dicts in BFCL) are given as one line each:
    ``Model Result Index i: <sub error type>: <sub errors>``.
    """

    valid: bool
    error_type: str = ""
    errors: list[str] = field(default_factory=list)


@dataclass
class _Result:
    """BFCL's mutable result dict, kept mutable so the port can follow its control flow."""

    valid: bool
    errors: list[str]
    error_type: str
    is_variable: bool = False


# ---------------------------------------------------------------------------------------------
# The tools BFCL sends (OpenAI chat completions style) and the names it expects back.


def tool_name(name: str) -> str:
    """The name BFCL gives a function for OpenAI-style providers: dots become underscores.

    Providers accept only ``^[a-zA-Z0-9_-]{1,64}$``; BFCL does not map a call's name back, its
    checker converts the expected name the same way (``convert_func_name``) before comparing.
    """
    return re.sub(r"\.", "_", name)


def _cast_to_openai_type(properties: dict[str, Any]) -> dict[str, Any]:
    for key, value in properties.items():
        if "type" not in value:
            value["type"] = "string"
        else:
            var_type = value["type"]
            if var_type == "float":
                value["format"] = "float"
                value["description"] = value.get("description", "") + " This is a float type value."
            value["type"] = GORILLA_TO_OPENAPI.get(var_type, "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = _cast_to_openai_type(value["properties"])
            elif "items" in value:
                items = value["items"]
                items["type"] = _openapi_type(items.get("type"), key)
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = _openapi_type(items["items"].get("type"), key)
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast_to_openai_type(items["properties"])
    return properties


def _openapi_type(name: Any, param: str) -> str:
    # BFCL indexes the mapping here (a KeyError for an unknown item type); say which.
    try:
        return GORILLA_TO_OPENAPI[name]
    except (KeyError, TypeError):
        raise UsageError(f"parameter {param!r}: BFCL has no JSON type for items {name!r}") from None


def openai_tools(
    functions: Sequence[Mapping[str, Any]], *, hint: bool = True
) -> list[dict[str, Any]]:
    """The ``tools`` BFCL sends an OpenAI chat-completions FC model for these functions.

    With ``hint`` (as BFCL generates), each description first gets :data:`PYTHON_HINT`. Then
    ``convert_to_tool(functions, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)``: names
    through :func:`tool_name`, ``parameters.type`` "object", BFCL's type names mapped to JSON
    Schema's (a float also gets ``format: float`` and a sentence in its description), and any
    other field (``response``, ``default``, ``enum``...) passed as it is.
    """
    tools: list[dict[str, Any]] = []
    for original in functions:
        item = copy.deepcopy(dict(original))
        if hint:
            item["description"] = item["description"] + PYTHON_HINT
        if "." in item["name"]:
            item["name"] = tool_name(item["name"])
        item["parameters"]["type"] = "object"
        item["parameters"]["properties"] = _cast_to_openai_type(item["parameters"]["properties"])
        tools.append({"type": "function", "function": item})
    return tools


def decode_openai_calls(calls: Sequence[tuple[str, str]]) -> list[dict[str, Any]] | None:
    """BFCL's decoding of an OpenAI FC reply: ``(name, arguments JSON)`` → ``[{name: args}]``.

    None when an argument string is not JSON: BFCL's ``decode_ast`` raises there, which counts
    as no call (irrelevance passes, the AST categories fail as ``decoder_failed``). A reply with
    no tool calls is None as well: BFCL then holds the reply's text, which does not decode.
    """
    decoded: list[dict[str, Any]] = []
    for name, arguments in calls:
        try:
            decoded.append({name: json.loads(arguments)})
        except ValueError:
            return None
    return decoded


def _is_call_format(decoded: Any) -> bool:
    """BFCL's ``is_function_calling_format_output``: a list of ``{name: {param: value}}``."""
    if isinstance(decoded, (str, bytes)) or not isinstance(decoded, Sequence):
        return False
    for item in decoded:
        if not isinstance(item, Mapping) or len(item) != 1:
            return False
        if not isinstance(next(iter(item.values())), Mapping):
            return False
    return True


def is_empty_output(decoded: Any) -> bool:
    """BFCL's ``is_empty_output``: no call, for the (ir)relevance categories.

    ``[]``, ``[{}]`` and anything not in the call format count as no call; so does None
    (nothing decoded).
    """
    if decoded is None or not _is_call_format(decoded):
        return True
    return len(decoded) == 0 or (len(decoded) == 1 and len(decoded[0]) == 0)


# ---------------------------------------------------------------------------------------------
# The checker.


def check(
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Mapping[str, Any]] | None,
    ground_truth: Sequence[Mapping[str, Any]] | None,
    category: str,
    *,
    underscore_to_dot: bool = True,
) -> Verdict:
    """BFCL's verdict on a model's decoded ``calls`` (``[{name: {param: value}}]``) for a case.

    ``calls`` is None when nothing decoded (see :func:`decode_openai_calls`). ``category`` is
    BFCL's (``simple_python``, ``live_parallel``...): it chooses the checker as BFCL's
    ``ast_checker`` does, by substring. ``underscore_to_dot`` is BFCL's model setting of that
    name, true for the OpenAI-style FC models whose tool names :func:`tool_name` converted.
    """
    if "irrelevance" in category:
        if is_empty_output(calls):
            return Verdict(True)
        return Verdict(
            False,
            "irrelevance_error:decoder_success",
            ["Valid syntax. Successfully decode AST when it should not."],
        )
    if "relevance" in category:
        if not is_empty_output(calls):
            return Verdict(True)
        reason = "None" if calls is not None else "The reply has no decodable call."
        return Verdict(
            False,
            "relevance_error:decoder_failed",
            [f"Invalid syntax. Failed to decode AST when it should have. {reason}"],
        )
    if calls is None:
        return Verdict(
            False,
            "ast_decoder:decoder_failed",
            ["Invalid syntax. Failed to decode AST. The reply has no decodable call."],
        )
    if not _is_call_format(calls):
        message = (
            "Did not output in the specified format. Note: the model_result is wrapped in a"
            " string to ensure json serializability."
        )
        return Verdict(False, "ast_decoder:decoder_wrong_output_format", [message])
    if ground_truth is None:
        raise UsageError(f"category {category!r} is judged against a ground truth; none given")
    result = _ast_checker(functions, calls, ground_truth, category, underscore_to_dot)
    if result.valid:
        return Verdict(True)
    return Verdict(False, result.error_type, list(result.errors))


def _ast_checker(
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Mapping[str, Any]],
    ground_truth: Sequence[Mapping[str, Any]],
    category: str,
    dots: bool,
) -> _Result:
    if "parallel" in category:
        return _parallel_no_order(functions, calls, ground_truth, dots)
    if "multiple" in category:
        return _multiple(functions, calls, ground_truth, dots)
    if len(calls) != 1:
        wrong = "simple_function_checker:wrong_count"
        return _Result(False, ["Wrong number of functions."], wrong)
    return _simple(functions[0], calls[0], ground_truth[0], dots)


def _find_description(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    for function in functions:
        if function["name"] == name:
            return function
    # BFCL goes on with None and fails on it; a ground truth naming an undeclared function
    # is a broken case, said plainly.
    raise UsageError(f"the ground truth names {name!r}, which the case does not declare")


def _parallel_no_order(
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Mapping[str, Any]],
    answers: Sequence[Mapping[str, Any]],
    dots: bool,
) -> _Result:
    """Each expected call, in turn, takes the first unmatched model call that passes."""
    if len(calls) != len(answers):
        wrong = "parallel_function_checker_no_order:wrong_count"
        return _Result(False, ["Wrong number of functions."], wrong)
    matched: list[int] = []
    for i, answer in enumerate(answers):
        description = _find_description(functions, next(iter(answer)))
        details: list[str] = []
        result = _Result(True, [], "")
        for index, call in enumerate(calls):
            if index in matched:
                continue
            result = _simple(description, call, answer, dots)
            if result.valid:
                matched.append(index)
                break
            sub = " ".join(result.errors)
            details.append(f"Model Result Index {index}: {result.error_type}: {sub}")
        if not result.valid:
            considered = [j for j in range(len(calls)) if j not in matched]
            first = (
                f"Could not find a matching function among index {considered} of model output"
                f" for index {i} of possible answers."
            )
            cannot = "parallel_function_checker_no_order:cannot_find_match"
            return _Result(False, [first, *details], cannot)
    return _Result(True, [], "")


def _multiple(
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Mapping[str, Any]],
    answers: Sequence[Mapping[str, Any]],
    dots: bool,
) -> _Result:
    if len(calls) != len(answers):
        wrong = "multiple_function_checker:wrong_count"
        return _Result(False, ["Wrong number of functions."], wrong)
    description = _find_description(functions, next(iter(answers[0])))
    return _simple(description, calls[0], answers[0], dots)


def _simple(
    description: Mapping[str, Any],
    call: Mapping[str, Any],
    answer: Mapping[str, Any],
    dots: bool,
) -> _Result:
    """BFCL's ``simple_function_checker`` for Python: one call against one expected call."""
    possible: Mapping[str, Any] = next(iter(answer.values()))
    func_name: str = description["name"]
    param_details: Mapping[str, Any] = description["parameters"]["properties"]
    required: Sequence[str] = description["parameters"]["required"]
    result = _Result(True, [], "simple_function_checker:unclear")

    if dots and "." in func_name:
        func_name = tool_name(func_name)
    if func_name not in call:
        result.valid = False
        result.errors.append(f"Function name {func_name!r} not found in model output.")
        result.error_type = "simple_function_checker:wrong_func_name"
        return result
    model_params: Mapping[str, Any] = call[func_name]

    for param in required:
        if param not in model_params:
            result.valid = False
            result.errors.append(f"Missing required parameter: {param!r}.")
            result.error_type = "simple_function_checker:missing_required"
            return result

    for param, value in model_params.items():
        if param not in param_details or param not in possible:
            result.valid = False
            result.errors.append(f"Unexpected parameter: {param!r}.")
            result.error_type = "simple_function_checker:unexpected_param"
            return result
        expected_description: str = param_details[param]["type"]
        expected = _python_type(expected_description, param)
        nested: type | None = None
        if expected_description in _NESTED:
            nested = _python_type(param_details[param]["items"]["type"], param)
        if expected_description == "tuple" and type(value) is tuple:
            value = list(value)
        # Python's own int-to-float conversion: 5 is a fine float.
        if expected_description == "float" and type(value) is int:
            value = float(value)

        typed = _type_checker(param, value, possible[param], expected_description, expected, nested)
        if not typed.valid:
            return typed
        if not typed.is_variable:
            if expected is dict:
                result = _dict_checker(value, possible[param])
                if not result.valid:
                    return result
                continue
            if expected is list and nested is dict:
                result = _list_dict_checker(value, possible[param])
                if not result.valid:
                    return result
                continue
            if expected is str:
                result = _string_checker(param, value, possible[param])
                if not result.valid:
                    return result
                continue
            if expected is list:
                result = _list_checker(param, value, possible[param])
                if not result.valid:
                    return result
                continue
        if value not in possible[param]:
            result.valid = False
            result.errors.append(
                f"Invalid value for parameter {param!r}: {value!r}."
                f" Expected one of {possible[param]}."
            )
            result.error_type = "value_error:others"
            return result

    for param in possible:
        if param not in model_params and "" not in possible[param]:
            result.valid = False
            result.errors.append(
                f"Optional parameter {param!r} not provided and not marked as optional."
            )
            result.error_type = "simple_function_checker:missing_optional"
            return result
    return result


def _python_type(name: Any, param: str) -> type:
    # BFCL indexes PYTHON_TYPE_MAPPING (a KeyError for another type name); say which.
    try:
        return _PYTHON_TYPES[name]
    except (KeyError, TypeError):
        raise UsageError(f"parameter {param!r}: BFCL's checker has no type {name!r}") from None


def _answer_type(possible: Sequence[Any]) -> type | None:
    """The type of the first possible value that is not ``""`` (BFCL's optional marker)."""
    for answer in possible:
        if answer != "":
            return type(answer)
    return None


def _type_checker(
    param: str,
    value: Any,
    possible: Sequence[Any],
    expected_description: str,
    expected: type,
    nested: type | None,
) -> _Result:
    """BFCL's ``type_checker``: the value's type, or a "variable" (a possible value of another
    type than declared, usually a string naming a variable), which skips the value checks."""
    result = _Result(True, [], "type_error:simple")
    is_variable = False
    answer_type = _answer_type(possible)
    if answer_type is not None and answer_type != expected:
        is_variable = True

    if type(value) is expected:
        if nested is None:
            result.is_variable = is_variable
            return result
        items: Any = value  # a list: its type was just checked
        for answer_item in possible:
            flag = True
            if type(answer_item) is list:
                for value_item in items:
                    inner = _type_checker(param, value_item, answer_item, str(nested), nested, None)
                    if not inner.valid:
                        flag = False
                        break
            if flag:
                return _Result(True, [], "", is_variable)
        result.valid = False
        result.errors = [
            f"Nested type checking failed for parameter {param!r}. Expected outer type"
            f" {expected_description} with inner type {nested}. Parameter value: {value!r}."
        ]
        result.error_type = "type_error:nested"

    # BFCL falls through here after a failed nested check too (so both messages are given).
    if answer_type is not None and type(value) is answer_type:
        result.is_variable = True
        return result
    result.valid = False
    result.errors.append(
        f"Incorrect type for parameter {param!r}. Expected type {expected_description},"
        f" got {type(value).__name__}. Parameter value: {value!r}."
    )
    result.error_type = "type_error:simple"
    return result


def standardize_string(text: str) -> str:
    """BFCL's normalisation: no spaces or ``,./-_*^``, lower case, single quotes made double, so
    "April 1, 2024" and "april 1 2024" are the same answer."""
    return re.sub(r"[ \,\.\/\-\_\*\^]", "", text).lower().replace("'", '"')


def _standard(value: Any) -> Any:
    return standardize_string(value) if type(value) is str else value


def _string_checker(param: str, value: str, possible: Sequence[Any]) -> _Result:
    answers = [standardize_string(a) for a in possible if type(a) is str]
    if standardize_string(value) not in answers:
        return _Result(
            False,
            [
                f"Invalid value for parameter {param!r}: {value!r}."
                f" Expected one of {possible}. Case insensitive."
            ],
            "value_error:string",
        )
    return _Result(True, [], "")


def _list_checker(param: str, value: Sequence[Any], possible: Sequence[Any]) -> _Result:
    standard = [_standard(item) for item in value]
    answers = [[_standard(item) for item in answer] for answer in possible]
    if standard not in answers:
        return _Result(
            False,
            [f"Invalid value for parameter {param!r}: {value!r}. Expected one of {possible}."],
            "value_error:list/tuple",
        )
    return _Result(True, [], "")


def _dict_checker(value: Mapping[str, Any], possible: Sequence[Any]) -> _Result:
    """One flat dict against each possible dict (``{key: [possible values]}``) in turn."""
    result = _Result(False, [], "dict_checker:unclear")
    for answer in possible:
        if answer == "":
            continue
        result = _Result(False, [], "dict_checker:unclear")
        flag = True
        for key, item in value.items():
            if key not in answer:
                result.errors.append(f"Unexpected dict key parameter: '{key}'.")
                result.error_type = "value_error:dict_key"
                flag = False
                break
            answers = [_standard(a) for a in answer[key]]
            if _standard(item) not in answers:
                result.errors.append(
                    f"Invalid value for parameter {key!r}: {item!r}. Expected one of {answers}."
                )
                result.error_type = "value_error:dict_value"
                flag = False
                break
        for key, options in answer.items():
            if key not in value and "" not in options:
                result.errors.append(f"Missing dict key parameter: '{key}'.")
                result.error_type = "value_error:dict_key"
                flag = False
                break
        if flag:
            return _Result(True, [], "")
    return result


def _list_dict_checker(value: Sequence[Any], possible: Sequence[Any]) -> _Result:
    """A list of dicts, in order, against each possible list in turn."""
    result = _Result(False, [], "list_dict_checker:unclear")
    for answer in possible:
        flag = True
        if len(value) != len(answer):
            result = _Result(
                False, ["Wrong number of dictionaries in the list."], "value_error:list_dict_count"
            )
            continue
        for index, item in enumerate(value):
            result = _dict_checker(item, [answer[index]])
            if not result.valid:
                flag = False
                break
        if flag:
            return _Result(True, [], "")
    return result
