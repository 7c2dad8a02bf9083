"""BFCL v4's single-turn Python cases, read from the ``bfcl-eval`` wheel's data files.

The Berkeley Function Calling Leaderboard ships its questions and ground truth in the
``bfcl-eval`` wheel (Apache-2.0); toolwire reads only its data files, never its modules (they
import every provider's SDK), so the wheel is installed without its dependencies. The
categories are BFCL's "python" collection, the ones its AST checker and relevance rules judge
(:mod:`toolwire.bench.bfcl_check`). Cases are joined with their ground truth by position in the
files, as BFCL joins them.
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
    "BfclCase",
    "bfcl_version",
    "data_dir",
    "load_category",
    "sample",
]

#: The version of ``bfcl-eval`` the checker was ported from and the data read from.
BFCL_VERSION = "2026.3.23"
INSTALL = f"pip install --no-deps bfcl-eval=={BFCL_VERSION}"
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
#: BFCL v1-v3 called simple_python "simple".
_ALIASES = {"simple": "simple_python"}


@dataclass(frozen=True)
class BfclCase:
    """One BFCL case: its question, its functions as the data gives them, its ground truth.

    ``question`` is a list of turns, each a list of chat messages (one turn here).
    ``ground_truth`` is ``[{name: {param: [possible values]}}]``, None for the (ir)relevance
    categories, which have none.
    """

    id: str
    category: str
    question: list[list[dict[str, Any]]]
    functions: list[dict[str, Any]]
    ground_truth: list[dict[str, Any]] | None

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
    if category not in CATEGORIES:
        raise UsageError(f"unknown BFCL category {name!r}; known: {', '.join(CATEGORIES)}")
    return category


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


def sample(categories: Iterable[str], n_per_category: int | None, seed: int = 0) -> list[BfclCase]:
    """Up to ``n_per_category`` cases of each category (all with None), category by category.

    Each category draws from its own ``random.Random`` seeded with the seed and its name, so a
    category's sample depends on nothing else asked for; the drawn cases keep the file's order.
    """
    if n_per_category is not None and n_per_category < 0:
        raise UsageError(f"n_per_category must be at least 0, not {n_per_category}")
    chosen: list[BfclCase] = []
    seen: set[str] = set()
    for name in categories:
        category = _category(name)
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
