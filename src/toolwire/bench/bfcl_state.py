"""BFCL's multi-turn judgement: the simulated APIs run, and each turn judged by their state.

A multi-turn case runs against BFCL's own simulated APIs (a file system, a message service,
a trading bot…: classes that ship in the ``bfcl-eval`` wheel). :class:`World` holds one set of
their instances, loaded with the case's starting state, and runs calls on them as BFCL's
``execute_multi_turn_func_call`` does — a method found by its name among the case's classes
(the last class that has it), its result as text (a dict as JSON), any exception the text
``Error during execution: …`` — but by calling the method, never ``eval`` of text, and with
instances owned by the world rather than kept in module globals.

:func:`check_turns` is a port of BFCL's ``multi_turn_checker``: the model's calls, turn by
turn and step by step, run again on a fresh world while the ground truth runs on another;
after each turn that expects calls, the model must have made some, the two worlds' public
state must be equal, and every result of the ground truth's turn must be among the results
of the model's calls so far (in any order). A conversation cut short (more steps in a turn
than BFCL allows, before its last turn) has fewer turns than the ground truth and fails whole,
as BFCL's ``force_terminated``.

The simulated APIs are BFCL's own code, run as BFCL runs them; one bound is added: an integer
argument past 64 bits is refused (``power(10, 10**9)`` would run for minutes), as the error
text the model reads.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ToolwireError, UsageError
from .bfcl_check import Verdict
from .bfcl_data import INSTALL, MultiTurn

__all__ = ["MAX_STEPS", "Call", "World", "check_turns", "parse_call"]

#: BFCL's MAXIMUM_STEP_LIMIT: a turn's model replies past it end the conversation.
MAX_STEPS = 20
#: A call: the method's name, its positional and its keyword arguments.
Call = tuple[str, tuple[Any, ...], dict[str, Any]]

_MODULE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code."
#: BFCL's CLASS_FILE_PATH_MAPPING, for the multi-turn classes.
_MODULES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
#: BFCL's STATELESS_CLASSES: no starting state to load.
_STATELESS = ("MathAPI",)
#: The names BFCL refuses to run, whatever class has them.
_REFUSED = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
#: The longest ground-truth call text read (BFCL's longest is under 1,000 characters).
_MAX_CALL_TEXT = 20_000
#: The largest integer a call may pass (a 64-bit one, as most JSON readers take).
_MAX_INT = 2**63


def parse_call(text: str) -> Call:
    """A ground-truth call as BFCL writes it (``mv(source='a', destination='b')``,
    ``sort('f')``): a name and literal arguments, read without running anything."""
    if len(text) > _MAX_CALL_TEXT:
        raise ToolwireError(f"a ground-truth call of {len(text)} characters")
    try:
        node = ast.parse(text.strip(), mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ValueError("not a call of a name")
        args = tuple(ast.literal_eval(a) for a in node.args)
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
        if len(kwargs) != len(node.keywords):
            raise ValueError("** arguments")
    except (SyntaxError, ValueError, TypeError, RecursionError) as exc:
        raise ToolwireError(f"cannot read BFCL's ground-truth call {text[:80]!r}: {exc}") from None
    return node.func.id, args, kwargs


class World:
    """One set of a case's simulated APIs, loaded with its starting state."""

    def __init__(self, multi: MultiTurn) -> None:
        self.instances: dict[str, Any] = {}
        self._methods: dict[str, Any] = {}
        for name in multi.involved_classes:
            if name not in _MODULES:
                raise ToolwireError(f"BFCL has no simulated API {name!r}")
            try:
                module = importlib.import_module(_MODULE + _MODULES[name])
            except ImportError as exc:
                raise UsageError(f"BFCL's simulated APIs cannot load ({exc}): {INSTALL}") from None
            instance = getattr(module, name)()
            if name not in _STATELESS:
                start = copy.deepcopy(multi.initial_config.get(name, {}))
                instance._load_scenario(start, long_context=multi.long_context)
            self.instances[name] = instance
            for method, bound in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not method.startswith("_"):
                    self._methods[method] = bound

    def run(self, calls: Sequence[Call]) -> list[str]:
        """Each call's result as BFCL gives it to the model and compares it."""
        return [self.run_one(*call) for call in calls]

    def run_one(self, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        try:
            if name in _REFUSED:
                raise PermissionError(f"Function call {name} is not allowed.")
            method = self._methods.get(name)
            if method is None:  # what BFCL's eval of an unknown name says
                raise NameError(f"name '{name}' is not defined")
            if _too_large([*args, *kwargs.values()]):
                raise ValueError("an integer argument is larger than 64 bits")
            # copies: a method may keep what it is given (a tweet keeps its mentions list,
            # and a later call extends it), and the same call runs in more than one world
            value = method(*copy.deepcopy(tuple(args)), **copy.deepcopy(dict(kwargs)))
            if isinstance(value, str):
                return value
            if isinstance(value, dict):
                try:
                    return json.dumps(value)
                except (TypeError, ValueError):
                    return str(value)
            return str(value)  # (an int past Python's digits limit raises: the error below)
        except Exception as exc:  # the simulated API's own failure is the result
            return f"Error during execution: {exc}"

    def state(self, name: str) -> dict[str, Any]:
        return {k: v for k, v in vars(self.instances[name]).items() if not k.startswith("_")}


def check_turns(multi: MultiTurn, turns: Sequence[Sequence[Sequence[Call]]]) -> Verdict:
    """BFCL's verdict on a conversation: ``turns[t][s]`` is the calls the model made in step
    ``s`` of turn ``t`` (a step without calls left out, as BFCL leaves out an empty decode);
    a conversation cut short has fewer turns."""
    expected = multi.ground_truth
    if len(turns) != len(expected):
        return Verdict(
            False,
            "multi_turn:force_terminated",
            [f"the model's conversation has {len(turns)} turns of {len(expected)}"],
        )
    model, truth = World(multi), World(multi)
    so_far: list[str] = []
    for index, (steps, wanted) in enumerate(zip(turns, expected, strict=True)):
        for step in steps:
            so_far.extend(model.run(step))
        truths = truth.run([parse_call(text) for text in wanted])
        if not wanted:  # a turn that expects nothing is not judged (BFCL: miss_* turns)
            continue
        if not any(steps):
            return Verdict(
                False,
                "multi_turn:empty_turn_model_response",
                [f"Model response list is empty for turn {index}"],
            )
        for name in truth.instances:
            mine, theirs = model.state(name), truth.state(name)
            differences = [k for k in theirs if mine.get(k) != theirs[k]]
            if differences:
                return Verdict(
                    False,
                    "multi_turn:instance_state_mismatch",
                    [f"turn {index}: {name} differs in {', '.join(differences)}"],
                )
        missing = _missing(truths, so_far)
        if missing:
            return Verdict(
                False,
                "multi_turn:execution_response_mismatch",
                [f"turn {index}: results missing: {[m[:120] for m in missing[:3]]}"],
            )
    return Verdict(True)


def _too_large(values: Sequence[Any]) -> bool:
    """Whether an integer past 64 bits is anywhere in the values (walked without recursion,
    each container once)."""
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _MAX_INT:
            return True
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return False


def _missing(wanted: Sequence[str], got: Sequence[str]) -> list[str]:
    """The wanted results not among the ones got, each got result counted once (BFCL's
    ``_is_subsequence_unordered``)."""
    pool = list(got)
    missing = []
    for item in wanted:
        if item in pool:
            pool.remove(item)
        else:
            missing.append(item)
    return missing
