"""BFCL v4's Python cases, single-turn and multi-turn, read from the ``bfcl-eval`` wheel's data.

The Berkeley Function Calling Leaderboard ships its questions and ground truth in the
``bfcl-eval`` wheel (Apache-2.0); toolwire reads only its data files, never its modules (they
import every provider's SDK), so the wheel is installed without its dependencies. The
categories are BFCL's "python" collection, the ones its AST checker and relevance rules judge
(:mod:`toolwire.bench.bfcl_check`). Cases are joined with their ground truth by position in the
files, as BFCL joins them. A multi-turn case's functions are its classes' documented methods
(the wheel's ``multi_turn_func_doc``), some held out until a later turn, as BFCL gives them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata, resources
from typing import TYPE_CHECKING, Any

from ..errors import ToolwireError, UsageError
from .bfcl_check import openai_tools

if TYPE_CHECKING:  # importlib.resources.abc is 3.11+; importlib.abc's is deprecated there
    from importlib.abc import Traversable

__all__ = [
    "BFCL_VERSION",
    "CATEGORIES",
    "INSTALL",
    "MULTI_TURN",
    "BfclCase",
    "MultiTurn",
    "bfcl_version",
    "data_dir",
    "load_category",
    "sample",
]

#: The version of ``bfcl-eval`` the checker was ported from and the data read from.
BFCL_VERSION = "2026.3.23"
#: Its data, and the one dependency of the simulated APIs the multi-turn cases run against.
INSTALL = f"pip install --no-deps bfcl-eval=={BFCL_VERSION} mpmath==1.3.0"
_PREFIX = "BFCL_v4"

#: BFCL's "python" test collection: every single-turn category judged for Python. The
#: irrelevance ones pass with no call, live_relevance with any call (BFCL does not check its
#: arguments), the others by the AST checker against the ground truth.
CATEGORIES: tuple[str, ...] = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
)
#: BFCL's multi-turn categories: each case a conversation of several user turns, run
#: against BFCL's simulated APIs and judged by their state and results after each turn.
MULTI_TURN: tuple[str, ...] = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
#: BFCL v1-v3 called simple_python "simple"; "multi_turn" names the four.
_ALIASES = {"simple": "simple_python"}
_GROUPS = {"multi_turn": MULTI_TURN}
#: The classes' function documents in the wheel (BFCL's MULTI_TURN_FUNC_DOC_FILE_MAPPING).
_FUNC_DOCS = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}


@dataclass(frozen=True)
class MultiTurn:
    """What a multi-turn case adds: the simulated APIs' classes and their starting state,
    the functions held out until a turn (by the turn's index; that turn has no user message:
    BFCL tells the model it has more functions), and the ground truth as BFCL writes it, the
    calls of each turn as Python text."""

    involved_classes: list[str]
    initial_config: dict[str, Any]
    held_out: dict[int, list[dict[str, Any]]]
    ground_truth: list[list[str]]
    long_context: bool


@dataclass(frozen=True)
class BfclCase:
    """One BFCL case: its question, its functions as the data gives them, its ground truth.

    ``question`` is a list of turns, each a list of chat messages (one turn here).
    ``ground_truth`` is ``[{name: {param: [possible values]}}]``, None for the (ir)relevance
    and multi-turn categories; a multi-turn case has ``multi`` (its functions are the ones
    offered from the first turn).
    """

    id: str
    category: str
    question: list[list[dict[str, Any]]]
    functions: list[dict[str, Any]]
    ground_truth: list[dict[str, Any]] | None
    multi: MultiTurn | None = None

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The ``tools`` BFCL sends an OpenAI-style FC model (Python hint, names converted)."""
        return openai_tools(self.functions)


def data_dir() -> Traversable:
    """The ``data`` directory of the installed ``bfcl_eval`` package (its ``__init__`` is empty,
    so finding it runs nothing)."""
    try:
        root = resources.files("bfcl_eval")
    except ModuleNotFoundError:
        raise UsageError(f"BFCL's data is not installed: {INSTALL}") from None
    data = root / "data"
    if not data.is_dir():
        raise UsageError(f"bfcl_eval has no data directory at {data}: {INSTALL}")
    return data


def bfcl_version() -> str | None:
    """The installed ``bfcl-eval`` version, for a report: the port matches :data:`BFCL_VERSION`."""
    try:
        return metadata.version("bfcl-eval")
    except metadata.PackageNotFoundError:
        return None


def _category(name: str) -> str:
    category = _ALIASES.get(name, name)
    if category not in CATEGORIES and category not in MULTI_TURN:
        known = ", ".join((*CATEGORIES, *MULTI_TURN, *_GROUPS))
        raise UsageError(f"unknown BFCL category {name!r}; known: {known}")
    return category


def expand(names: Iterable[str]) -> list[str]:
    """Category names with BFCL's aliases and groups (``multi_turn``) spelled out, in order,
    each once; an unknown name is a usage error."""
    out: list[str] = []
    for name in names:
        for category in _GROUPS.get(name, (name,)):
            category = _category(category)
            if category not in out:
                out.append(category)
    return out


def _json_lines(path: Traversable) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise ToolwireError(f"cannot read BFCL's {path.name}: {exc}") from None
    if not all(isinstance(row, dict) for row in rows):
        raise ToolwireError(f"BFCL's {path.name} is not JSON lines of objects")
    return rows


def load_category(name: str) -> list[BfclCase]:
    """Every case of one category, in the file's order, with its ground truth."""
    category = _category(name)
    if category in MULTI_TURN:
        return _multi_turn(category)
    data = data_dir()
    file = f"{_PREFIX}_{category}.json"
    entries = _json_lines(data / file)
    truths: list[dict[str, Any]] | None = None
    if "relevance" not in category:
        truths = _json_lines(data / "possible_answer" / file)
        if len(truths) != len(entries):
            raise ToolwireError(
                f"BFCL's {file}: {len(entries)} cases but {len(truths)} ground truths"
            )
    try:
        return [
            BfclCase(
                id=str(entry["id"]),
                category=category,
                question=list(entry["question"]),
                functions=list(entry["function"]),
                ground_truth=None if truths is None else list(truths[i]["ground_truth"]),
            )
            for i, entry in enumerate(entries)
        ]
    except (KeyError, TypeError) as exc:
        raise ToolwireError(f"BFCL's {file} has a case without {exc}") from None


def _multi_turn(category: str) -> list[BfclCase]:
    data = data_dir()
    file = f"{_PREFIX}_{category}.json"
    entries = _json_lines(data / file)
    truths = _json_lines(data / "possible_answer" / file)
    if len(truths) != len(entries):
        raise ToolwireError(f"BFCL's {file}: {len(entries)} cases but {len(truths)} ground truths")
    docs: dict[str, list[dict[str, Any]]] = {}
    cases = []
    try:
        for entry, truth in zip(entries, truths, strict=True):
            classes = [str(c) for c in entry["involved_classes"]]
            functions: list[dict[str, Any]] = []
            for name in classes:
                if name not in _FUNC_DOCS:
                    raise ToolwireError(f"BFCL's {file}: no simulated API {name!r}")
                if name not in docs:
                    docs[name] = _json_lines(data / "multi_turn_func_doc" / _FUNC_DOCS[name])
                functions.extend(docs[name])
            held_out: dict[int, list[dict[str, Any]]] = {}
            for turn, names in (entry.get("missed_function") or {}).items():
                # as BFCL does: each named function (its first one of that name) leaves the
                # list until its turn, joining it then in the order named
                held_out[int(turn)] = []
                for missed in names:
                    at = next((i for i, f in enumerate(functions) if f["name"] == missed), None)
                    if at is not None:
                        held_out[int(turn)].append(functions.pop(at))
            cases.append(
                BfclCase(
                    id=str(entry["id"]),
                    category=category,
                    question=list(entry["question"]),
                    functions=functions,
                    ground_truth=None,
                    multi=MultiTurn(
                        involved_classes=classes,
                        initial_config=dict(entry.get("initial_config") or {}),
                        held_out=held_out,
                        ground_truth=[list(turn) for turn in truth["ground_truth"]],
                        long_context="long_context" in category,
                    ),
                )
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise ToolwireError(f"BFCL's {file} has a case without {exc}") from None
    return cases


def sample(categories: Iterable[str], n_per_category: int | None, seed: int = 0) -> list[BfclCase]:
    """Up to ``n_per_category`` cases of each category (all with None), category by category.

    Each category draws from its own ``random.Random`` seeded with the seed and its name, so a
    category's sample depends on nothing else asked for; the drawn cases keep the file's order.
    """
    if n_per_category is not None and n_per_category < 0:
        raise UsageError(f"n_per_category must be at least 0, not {n_per_category}")
    chosen: list[BfclCase] = []
    seen: set[str] = set()
    for category in expand(categories):
        if category in seen:
            continue
        seen.add(category)
        cases = load_category(category)
        if n_per_category is None or n_per_category >= len(cases):
            chosen.extend(cases)
            continue
        rng = random.Random(f"{seed}:{category}")
        picked = sorted(rng.sample(range(len(cases)), n_per_category))
        chosen.extend(cases[i] for i in picked)
    return chosen
